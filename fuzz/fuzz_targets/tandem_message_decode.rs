//! Fuzzes the tandem record decoder: any bytes, any parameters. Checks that decoding never
//! panics, records lie back to back inside the input, errors come at the next record's
//! offset and stop the decoder, every record dumps on one line, and every record re-encodes
//! to bytes that decode to the same record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_message::{
    detect, dump_record, AddressWidth, Flen, Parameters, Record, RecordDecoder, RecordEncoder, Xlen,
};

fuzz_target!(|input: &[u8]| {
    let Some((&config, stream)) = input.split_first() else {
        return;
    };
    let xlen = if config & 1 != 0 {
        Xlen::Bits32
    } else {
        Xlen::Bits64
    };
    let flen = match (config >> 1) & 3 {
        0 => Flen::None,
        1 => Flen::Bits32,
        _ => Flen::Bits64,
    };
    let width = match (config >> 3) & 7 {
        0 => AddressWidth::Bits32,
        1 => AddressWidth::Bits40,
        2 => AddressWidth::Bits48,
        3 => AddressWidth::Bits56,
        _ => AddressWidth::Bits64,
    };
    let parameters = Parameters::new(xlen, flen, width);
    let _ = detect(stream);
    let mut decoder = RecordDecoder::new(stream, parameters);
    let mut encoder = RecordEncoder::new(parameters);
    let mut expected_offset = 0u64;
    let mut line = String::new();
    let mut previous: Option<Record> = None;
    loop {
        match decoder.next_record() {
            Ok(Some(located)) => {
                assert_eq!(located.offset, expected_offset);
                expected_offset = located.end_offset();
                assert!(expected_offset <= stream.len() as u64);
                line.clear();
                dump_record(&located, parameters, &mut line).expect("formatting into a String");
                assert!(!line.contains('\n'));
                let mut bytes = Vec::new();
                encoder
                    .encode(&located.record, &mut bytes)
                    .expect("a decoded record re-encodes");
                // A response decodes only after its request: decode the pair.
                let mut context = Vec::new();
                if let (Record::MemoryResponse { .. }, Some(request)) = (located.record, previous) {
                    RecordEncoder::new(parameters)
                        .encode(&request, &mut context)
                        .expect("the request re-encodes");
                }
                let skip = context.len();
                context.extend_from_slice(&bytes);
                let mut again = RecordDecoder::new(&context, parameters);
                if skip > 0 {
                    again.next_record().expect("request decodes");
                }
                let record = again.next_record().expect("re-encoded record decodes");
                assert_eq!(record.map(|r| r.record), Some(located.record));
                previous = Some(located.record);
            }
            Ok(None) => break,
            Err(error) => {
                assert_eq!(error.offset, expected_offset);
                assert!(!error.to_string().contains('\n'));
                assert_eq!(decoder.next_record(), Ok(None));
                break;
            }
        }
    }
});
