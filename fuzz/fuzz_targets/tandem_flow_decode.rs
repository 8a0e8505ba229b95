//! Fuzzes tandem steps, trace elements and the comparison: any bytes, RV64 or RV32
//! parameters. Checks that nothing panics, steps are numbered and placed in order, and a
//! trace compared with itself never diverges.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_flow::{
    compare, CompareOptions, ElementOptions, StateElements, StepDecoder, TandemElements,
};
use tandem_message::{AddressWidth, Flen, Parameters, Xlen};
use trace_elements::ElementSource;

fuzz_target!(|input: &[u8]| {
    let Some((&config, stream)) = input.split_first() else {
        return;
    };
    let parameters = if config & 1 != 0 {
        Parameters::new(Xlen::Bits32, Flen::Bits32, AddressWidth::Bits40)
    } else {
        Parameters::default()
    };
    let mut steps = StepDecoder::new(stream, parameters);
    let mut index = 0;
    let mut previous_end = 0;
    while let Ok(Some(step)) = steps.next_step() {
        assert_eq!(step.index, index);
        assert!(step.offset >= previous_end && step.end_offset > step.offset);
        assert!(step.end_offset <= stream.len() as u64);
        previous_end = step.end_offset;
        index += 1;
    }
    let state = if config & 2 != 0 {
        StateElements::Report
    } else {
        StateElements::Omit
    };
    let mut elements = TandemElements::new(
        StepDecoder::new(stream, parameters),
        ElementOptions::default().with_state(state),
    );
    let mut count = 0u64;
    while let Ok(Some(_)) = elements.next_element() {
        count += 1;
        assert!(count <= 64 * stream.len() as u64 + 64, "elements never end");
    }
    if let Ok(comparison) = compare(
        StepDecoder::new(stream, parameters),
        StepDecoder::new(stream, parameters),
        &CompareOptions::default(),
    ) {
        assert_eq!(comparison.divergence, None);
    }
});
