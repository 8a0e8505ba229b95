use super::*;

const TYPES: [SampleType<'static>; 2] = [
    SampleType {
        kind: "samples",
        unit: "count",
    },
    SampleType {
        kind: "cpu",
        unit: "nanoseconds",
    },
];

fn libc(builder: &mut ProfileBuilder) -> MappingId {
    builder.mapping(&MappingSpec {
        start: 0x1000,
        limit: 0x5000,
        file_offset: 0,
        filename: "/lib/libc.so.6",
        build_id: Some(&[0xde, 0xad, 0x0b, 0xee]),
        symbols: MappingSymbols::InlineFrames,
    })
}

fn function(builder: &mut ProfileBuilder, name: &str) -> FunctionId {
    builder.function(&FunctionSpec {
        name,
        system_name: name,
        filename: Some("a.c"),
        start_line: Some(10),
    })
}

fn line(function: FunctionId) -> LineSpec {
    LineSpec {
        function,
        line: Some(12),
        column: None,
    }
}

#[test]
fn strings_mappings_functions_and_locations_are_interned_once() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let mapping = libc(&mut builder);
    assert_eq!(libc(&mut builder), mapping);
    let hot = function(&mut builder, "hot");
    assert_eq!(function(&mut builder, "hot"), hot);
    assert_eq!(builder.address_location(Some(mapping), 0x1234), None);
    let location = builder
        .add_address_location(Some(mapping), 0x1234, &[line(hot)])
        .unwrap();
    assert_eq!(
        builder.address_location(Some(mapping), 0x1234),
        Some(location)
    );
    assert_eq!(
        builder
            .add_address_location(Some(mapping), 0x1234, &[])
            .unwrap(),
        location
    );
    let profile = builder.build();
    assert_eq!(profile.string_table[0], "");
    assert_eq!(profile.mapping.len(), 1);
    assert_eq!(profile.function.len(), 1);
    assert_eq!(profile.location.len(), 1);
    let build_id = profile.mapping[0].build_id as usize;
    assert_eq!(profile.string_table[build_id], "dead0bee");
    assert!(profile.mapping[0].has_inline_frames);
    let mut sorted = profile.string_table.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), profile.string_table.len(), "a string twice");
}

#[test]
fn the_main_mapping_moves_first_with_its_locations() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let kernel = builder.mapping(&MappingSpec {
        start: 0xffff_0000_0000_0000,
        limit: u64::MAX,
        file_offset: 0,
        filename: "[kernel.kallsyms]",
        build_id: None,
        symbols: MappingSymbols::Functions,
    });
    let program = libc(&mut builder);
    let hot = function(&mut builder, "hot");
    let in_kernel = builder
        .add_address_location(Some(kernel), 0xffff_0000_0000_1000, &[line(hot)])
        .unwrap();
    let in_program = builder
        .add_address_location(Some(program), 0x1234, &[line(hot)])
        .unwrap();
    builder
        .add_sample(&[in_program, in_kernel], &[1, 1], &[])
        .unwrap();
    builder.set_main_mapping(program);
    let profile = builder.build();
    let name = |index: i64| profile.string_table[index as usize].as_str();
    assert_eq!(name(profile.mapping[0].filename), "/lib/libc.so.6");
    assert_eq!(profile.mapping[0].id, 1);
    assert_eq!(profile.mapping[1].id, 2);
    let mapping_of = |address: u64| {
        profile
            .location
            .iter()
            .find(|location| location.address == address)
            .unwrap()
            .mapping_id
    };
    assert_eq!(mapping_of(0x1234), 1);
    assert_eq!(mapping_of(0xffff_0000_0000_1000), 2);
}

#[test]
fn equal_stacks_with_equal_labels_merge_and_others_do_not() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let hot = function(&mut builder, "hot");
    let main = function(&mut builder, "main");
    let hot_location = builder.function_location(hot).unwrap();
    let main_location = builder.function_location(main).unwrap();
    let stack = [hot_location, main_location];
    let pid = |value| LabelSpec {
        key: "pid",
        value: LabelValue::Number { value, unit: None },
    };
    builder.add_sample(&stack, &[1, 10], &[pid(7)]).unwrap();
    builder.add_sample(&stack, &[2, 20], &[pid(7)]).unwrap();
    builder.add_sample(&stack, &[1, 10], &[pid(8)]).unwrap();
    builder
        .add_sample(&stack[1..], &[1, 10], &[pid(7)])
        .unwrap();
    builder
        .add_sample(&stack, &[i64::MAX, 0], &[pid(7)])
        .unwrap();
    assert_eq!(builder.sample_count(), 3);
    let profile = builder.build();
    assert_eq!(profile.sample[0].value, vec![i64::MAX, 30]);
    assert_eq!(profile.sample[0].location_id, vec![1, 2]);
    assert_eq!(profile.sample[0].label[0].num, 7);
    assert_eq!(profile.sample[1].label[0].num, 8);
    assert_eq!(profile.sample[2].location_id, vec![2]);
}

#[test]
fn wrong_value_counts_and_foreign_ids_are_refused() {
    let mut builder = ProfileBuilder::new(&TYPES);
    assert!(matches!(
        builder.add_sample(&[], &[1], &[]),
        Err(PprofError::ValueCount {
            expected: 2,
            given: 1
        })
    ));
    assert!(matches!(
        builder.add_sample(&[LocationId(3)], &[1, 1], &[]),
        Err(PprofError::UnknownId {
            what: "location",
            id: 3
        })
    ));
    assert!(matches!(
        builder.add_address_location(Some(MappingId(1)), 1, &[]),
        Err(PprofError::UnknownId {
            what: "mapping",
            ..
        })
    ));
    assert!(matches!(
        builder.function_location(FunctionId(9)),
        Err(PprofError::UnknownId {
            what: "function",
            ..
        })
    ));
}

#[test]
fn gzip_round_trips_and_bad_bytes_are_errors() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let mapping = libc(&mut builder);
    let hot = function(&mut builder, "hot");
    let location = builder
        .add_address_location(Some(mapping), 0x1234, &[line(hot)])
        .unwrap();
    builder
        .add_sample(
            &[location],
            &[3, 30],
            &[LabelSpec {
                key: "comm",
                value: LabelValue::Text("hot"),
            }],
        )
        .unwrap();
    builder.set_metadata(ProfileMetadata {
        time_nanos: 5,
        duration_nanos: 6,
        period: Some(("cpu".into(), "nanoseconds".into(), 1_000_000)),
        comments: vec!["rvperf".into()],
        default_sample_type: Some("cpu".into()),
    });
    let profile = builder.build();
    let mut bytes = Vec::new();
    write_gzip(&profile, &mut bytes).unwrap();
    assert_eq!(&bytes[..2], &GZIP_MAGIC);
    assert_eq!(read(&bytes).unwrap(), profile);
    assert_eq!(read(&profile.encode_to_vec()).unwrap(), profile);
    assert!(matches!(
        read(&bytes[..bytes.len() / 2]),
        Err(PprofError::Gzip { .. })
    ));
    assert!(matches!(
        read(&[0x0a, 0x05, 0x01]),
        Err(PprofError::Decode { length: 3, .. })
    ));
}

#[test]
fn merging_two_profiles_sums_their_equal_stacks() {
    let interval = |weight: i64, extra: bool| {
        let mut builder = ProfileBuilder::new(&TYPES);
        let mapping = libc(&mut builder);
        let hot = function(&mut builder, "hot");
        let location = builder
            .add_address_location(Some(mapping), 0x1234, &[line(hot)])
            .unwrap();
        let comm = [LabelSpec {
            key: "comm",
            value: LabelValue::Text("hot"),
        }];
        builder
            .add_sample(&[location], &[weight, weight * 10], &comm)
            .unwrap();
        if extra {
            let cold = function(&mut builder, "cold");
            let location = builder.function_location(cold).unwrap();
            builder.add_sample(&[location], &[1, 1], &[]).unwrap();
        }
        builder.build()
    };
    let mut merged = ProfileBuilder::new(&TYPES);
    merged.merge(&interval(2, false)).unwrap();
    merged.merge(&interval(3, true)).unwrap();
    let profile = merged.snapshot();
    assert_eq!(profile.sample.len(), 2);
    assert_eq!(profile.sample[0].value, vec![5, 50]);
    assert_eq!(profile.mapping.len(), 1);
    assert_eq!(
        profile.string_table[profile.mapping[0].build_id as usize],
        "dead0bee"
    );
    assert_eq!(profile.location.len(), 2);
    assert_eq!(merged.snapshot(), profile, "a snapshot leaves the builder");
    let mut other = ProfileBuilder::new(&TYPES[..1]);
    assert!(matches!(
        other.merge(&profile),
        Err(PprofError::SampleTypes { .. })
    ));
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_reader(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
        let _ = read(&bytes);
    }
}

#[test]
fn a_missing_build_id_is_filled_once_and_the_mapping_stays_one() {
    let mut builder = ProfileBuilder::new(&[SampleType {
        kind: "samples",
        unit: "count",
    }]);
    let spec = MappingSpec {
        start: 0,
        limit: 0x1000,
        file_offset: 0,
        filename: "/opt/hot",
        build_id: None,
        symbols: MappingSymbols::Functions,
    };
    let mapping = builder.mapping(&spec);
    builder.set_missing_build_id(mapping, &[0xab, 0xcd]);
    // A build id once set is not replaced, and the same file with it is the same mapping.
    builder.set_missing_build_id(mapping, &[0x01]);
    assert_eq!(
        builder.mapping(&MappingSpec {
            build_id: Some(&[0xab, 0xcd]),
            ..spec
        }),
        mapping
    );
    let profile = builder.build();
    assert_eq!(profile.mapping.len(), 1);
    assert_eq!(
        profile.string_table[profile.mapping[0].build_id as usize],
        "abcd"
    );
}

#[test]
fn samples_beyond_the_limit_are_folded_into_the_stand_in_with_their_labels() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let mapping = libc(&mut builder);
    let stand_in_function = function(&mut builder, "[over the limit]");
    let stand_in = builder.function_location(stand_in_function).unwrap();
    builder.set_sample_limit(3, stand_in);
    let locations: Vec<LocationId> = (0..4u64)
        .map(|index| {
            let name = format!("f{index}");
            let function = function(&mut builder, &name);
            builder
                .add_address_location(Some(mapping), 0x1000 + index * 16, &[line(function)])
                .unwrap()
        })
        .collect();
    let comm = |name: &'static str| LabelSpec {
        key: "comm",
        value: LabelValue::Text(name),
    };
    builder
        .add_sample(&[locations[0]], &[1, 10], &[comm("a")])
        .unwrap();
    builder
        .add_sample(&[locations[1]], &[1, 10], &[comm("a")])
        .unwrap();
    builder
        .add_sample(&[locations[2]], &[1, 10], &[comm("b")])
        .unwrap();
    // Over the limit: new stacks go to the stand-in under their own labels; a stack
    // already there still adds up.
    builder
        .add_sample(&[locations[3]], &[2, 20], &[comm("a")])
        .unwrap();
    builder
        .add_sample(&[locations[3], locations[0]], &[3, 30], &[comm("a")])
        .unwrap();
    builder
        .add_sample(&[locations[3]], &[4, 40], &[comm("b")])
        .unwrap();
    builder
        .add_sample(&[locations[0]], &[5, 50], &[comm("a")])
        .unwrap();
    assert_eq!(builder.over_limit(), &[9, 90]);
    let profile = builder.build();
    let total: i64 = profile.sample.iter().map(|sample| sample.value[0]).sum();
    assert_eq!(total, 1 + 1 + 1 + 2 + 3 + 4 + 5);
    assert_eq!(
        profile.sample.len(),
        5,
        "three stacks and two stand-ins (a, b)"
    );
    let stand_in_values: Vec<i64> = profile
        .sample
        .iter()
        .filter(|sample| sample.location_id == [stand_in.get()])
        .map(|sample| sample.value[0])
        .collect();
    assert_eq!(stand_in_values, [5, 4]);
    let first = profile
        .sample
        .iter()
        .find(|sample| sample.location_id == [locations[0].get()])
        .unwrap();
    assert_eq!(first.value, [6, 60]);
}

#[test]
fn samples_are_found_again_after_the_index_grows() {
    // The index keeps sample numbers and rehashes them from the stored samples as it
    // grows: every stack added a second time must find its first sample.
    let mut builder = ProfileBuilder::new(&TYPES);
    let functions: Vec<LocationId> = (0..40)
        .map(|number| {
            let function = function(&mut builder, &format!("f{number}"));
            builder.function_location(function).unwrap()
        })
        .collect();
    let comm = |name| LabelSpec {
        key: "comm",
        value: LabelValue::Text(name),
    };
    let stacks: Vec<Vec<LocationId>> = (0..2000usize)
        .map(|number| {
            vec![
                functions[number % 40],
                functions[number / 40 % 40],
                functions[number / 1600],
            ]
        })
        .collect();
    for round in 0..2 {
        for (number, stack) in stacks.iter().enumerate() {
            let name = if number % 2 == 0 { "even" } else { "odd" };
            builder
                .add_sample(stack, &[1, round], &[comm(name)])
                .unwrap();
        }
    }
    assert_eq!(builder.sample_count(), 2000);
    let profile = builder.build();
    assert!(profile
        .sample
        .iter()
        .all(|sample| sample.value == vec![2, 1]));
}
