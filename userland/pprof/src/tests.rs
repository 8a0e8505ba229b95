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
fn addresses_of_the_same_functions_share_one_location_by_functions() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let mapping = libc(&mut builder);
    let hot = function(&mut builder, "hot");
    let inlined = function(&mut builder, "inlined");
    let at_line = |function, line| LineSpec {
        function,
        line: Some(line),
        column: Some(3),
    };
    let first = builder
        .add_functions_location(Some(mapping), 0x1234, &[at_line(hot, 12)])
        .unwrap();
    // Another instruction of `hot`, at another line: the same location, found by its
    // address from now on.
    let second = builder
        .add_functions_location(Some(mapping), 0x1240, &[at_line(hot, 14)])
        .unwrap();
    assert_eq!(second, first);
    assert_eq!(builder.address_location(Some(mapping), 0x1240), Some(first));
    // `inlined` inlined into `hot`, the same functions in another order, or another
    // mapping: locations of their own.
    let inline_stack = builder
        .add_functions_location(
            Some(mapping),
            0x1250,
            &[at_line(inlined, 3), at_line(hot, 15)],
        )
        .unwrap();
    let reversed = builder
        .add_functions_location(
            Some(mapping),
            0x1260,
            &[at_line(hot, 3), at_line(inlined, 15)],
        )
        .unwrap();
    let elsewhere = builder
        .add_functions_location(None, 0x1234, &[at_line(hot, 12)])
        .unwrap();
    let distinct = [first, inline_stack, reversed, elsewhere];
    for (index, location) in distinct.iter().enumerate() {
        assert!(!distinct[..index].contains(location), "{distinct:?}");
    }
    // No function: the address's own location.
    let unknown = builder
        .add_functions_location(Some(mapping), 0x2000, &[])
        .unwrap();
    let unknown_too = builder
        .add_functions_location(Some(mapping), 0x2004, &[])
        .unwrap();
    assert_ne!(unknown, unknown_too);
    let profile = builder.build();
    assert_eq!(profile.location.len(), 6);
    // The location is made at the first address, with functions and no line numbers.
    let location = &profile.location[0];
    assert_eq!(location.address, 0x1234);
    assert_eq!(location.line.len(), 1);
    assert_eq!((location.line[0].line, location.line[0].column), (0, 0));
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

/// A profile's samples as names: each stack's function names (leaf first, a location
/// without lines as its mapping's file), values and labels, sorted, for comparing
/// profiles numbered differently.
fn resolved(profile: &Profile) -> Vec<(Vec<String>, Vec<i64>, Vec<String>)> {
    let text = |index: i64| profile.string_table[index as usize].clone();
    let mut samples: Vec<(Vec<String>, Vec<i64>, Vec<String>)> = profile
        .sample
        .iter()
        .map(|sample| {
            let names = sample
                .location_id
                .iter()
                .flat_map(|&id| {
                    let location = profile.location.iter().find(|l| l.id == id).unwrap();
                    let mapping = profile.mapping.iter().find(|m| m.id == location.mapping_id);
                    let mut names: Vec<String> = location
                        .line
                        .iter()
                        .map(|line| {
                            let function = profile
                                .function
                                .iter()
                                .find(|f| f.id == line.function_id)
                                .unwrap();
                            text(function.name)
                        })
                        .collect();
                    names.push(format!(
                        "{}+{:#x}@{}",
                        mapping.map_or(String::new(), |m| text(m.filename)),
                        location.address,
                        mapping.map_or(String::new(), |m| text(m.build_id)),
                    ));
                    names
                })
                .collect();
            let labels = sample
                .label
                .iter()
                .map(|label| format!("{}={}{}", text(label.key), text(label.str), label.num))
                .collect();
            (names, sample.value.clone(), labels)
        })
        .collect();
    samples.sort();
    samples
}

/// Every string index of `profile` is in its table, and its ids are 1, 2, 3...
fn assert_well_formed(profile: &Profile) {
    let strings = profile.string_table.len() as i64;
    assert_eq!(profile.string_table[0], "");
    let mut indices = vec![profile.default_sample_type];
    indices.extend(profile.comment.iter().copied());
    for value_type in profile.sample_type.iter().chain(&profile.period_type) {
        indices.extend([value_type.r#type, value_type.unit]);
    }
    for mapping in &profile.mapping {
        indices.extend([mapping.filename, mapping.build_id]);
    }
    for function in &profile.function {
        indices.extend([function.name, function.system_name, function.filename]);
    }
    for label in profile.sample.iter().flat_map(|sample| &sample.label) {
        indices.extend([label.key, label.str, label.num_unit]);
    }
    assert!(indices.iter().all(|&index| (0..strings).contains(&index)));
    let dense = |ids: Vec<u64>| ids.iter().enumerate().all(|(n, &id)| id == n as u64 + 1);
    assert!(dense(profile.mapping.iter().map(|m| m.id).collect()));
    assert!(dense(profile.function.iter().map(|f| f.id).collect()));
    assert!(dense(profile.location.iter().map(|l| l.id).collect()));
}

#[test]
fn intervals_taken_from_one_builder_are_whole_profiles_and_add_up_to_the_run() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let comm = [LabelSpec {
        key: "comm",
        value: LabelValue::Text("hot"),
    }];
    let metadata = ProfileMetadata {
        period: Some(("cpu".into(), "nanoseconds".into(), 1_000_000)),
        comments: vec!["interval".into()],
        default_sample_type: Some("cpu".into()),
        ..ProfileMetadata::default()
    };
    // Interval 1: hot in libc.
    let libc_mapping = libc(&mut builder);
    let hot = function(&mut builder, "hot");
    let hot_location = builder
        .add_address_location(Some(libc_mapping), 0x1234, &[line(hot)])
        .unwrap();
    builder
        .add_sample(&[hot_location], &[2, 20], &comm)
        .unwrap();
    let first = builder.take_samples();
    assert_eq!(builder.sample_count(), 0, "taking leaves no samples");
    // Interval 2: hot again (its location found, not added again), and cold, in a
    // program that is this interval's main mapping.
    assert_eq!(
        builder.address_location(Some(libc_mapping), 0x1234),
        Some(hot_location)
    );
    let program = builder.mapping(&MappingSpec {
        start: 0,
        limit: 0x1000,
        file_offset: 0,
        filename: "/opt/program",
        build_id: Some(&[0x12]),
        symbols: MappingSymbols::Functions,
    });
    let cold = function(&mut builder, "cold");
    let cold_location = builder
        .add_address_location(Some(program), 0x40, &[line(cold)])
        .unwrap();
    builder
        .add_sample(&[hot_location], &[3, 30], &comm)
        .unwrap();
    builder
        .add_sample(&[cold_location, hot_location], &[1, 10], &[])
        .unwrap();
    // A location of neither interval's samples.
    let unused = function(&mut builder, "unused");
    builder.function_location(unused).unwrap();
    let second = builder.take_samples();

    let first_profile = builder.profile_of(&first, &metadata, None).unwrap();
    assert_well_formed(&first_profile);
    assert_eq!(
        resolved(&first_profile),
        [(
            vec![
                "hot".to_owned(),
                "/lib/libc.so.6+0x1234@dead0bee".to_owned()
            ],
            vec![2, 20],
            vec!["comm=hot0".to_owned()]
        )]
    );
    for absent in ["cold", "unused", "/opt/program"] {
        assert!(
            !first_profile.string_table.iter().any(|text| text == absent),
            "{absent} is not in the first interval's profile"
        );
    }
    assert_eq!(first_profile.period, 1_000_000);
    assert_eq!(
        first_profile.string_table[first_profile.default_sample_type as usize],
        "cpu"
    );

    let second_profile = builder
        .profile_of(&second, &metadata, Some(program))
        .unwrap();
    assert_well_formed(&second_profile);
    assert_eq!(
        second_profile.string_table[second_profile.mapping[0].filename as usize], "/opt/program",
        "the main mapping first"
    );
    assert_eq!(second_profile.location.len(), 2);
    assert_eq!(second_profile.function.len(), 2);

    let mut total = builder.new_samples();
    total.absorb(&first).unwrap();
    total.absorb(&second).unwrap();
    assert_eq!(total.len(), 2);
    let run = builder.profile_of(&total, &metadata, None).unwrap();
    assert_well_formed(&run);
    assert_eq!(
        resolved(&run),
        [
            (
                vec![
                    "cold".to_owned(),
                    "/opt/program+0x40@12".to_owned(),
                    "hot".to_owned(),
                    "/lib/libc.so.6+0x1234@dead0bee".to_owned()
                ],
                vec![1, 10],
                vec![]
            ),
            (
                vec![
                    "hot".to_owned(),
                    "/lib/libc.so.6+0x1234@dead0bee".to_owned()
                ],
                vec![5, 50],
                vec!["comm=hot0".to_owned()]
            ),
        ]
    );
    // The same samples built the one-shot way name the same stacks.
    builder
        .add_sample(&[hot_location], &[5, 50], &comm)
        .unwrap();
    builder
        .add_sample(&[cold_location, hot_location], &[1, 10], &[])
        .unwrap();
    assert_eq!(resolved(&builder.build()), resolved(&run));
    let mut bytes = Vec::new();
    write_gzip(&run, &mut bytes).unwrap();
    assert_eq!(read(&bytes).unwrap(), run);
}

/// What [`ProfileBuilder::encode_profile_of`] writes field by field is the message
/// prost writes for the profile it decodes to: fields in number order, each sample,
/// location and function renumbered, strings the samples and the metadata use.
#[test]
fn an_encoded_profile_is_what_prost_writes_for_it() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let libc_mapping = libc(&mut builder);
    let program = builder.mapping(&MappingSpec {
        start: 0x40_0000,
        limit: 0x50_0000,
        file_offset: 0x1000,
        filename: "/opt/program",
        build_id: None,
        symbols: MappingSymbols::Functions,
    });
    let [outer, inner, leaf, unused] =
        ["outer", "inner", "leaf", "unused"].map(|name| function(&mut builder, name));
    let inlined = builder
        .add_address_location(Some(program), 0x40_1000, &[line(inner), line(outer)])
        .unwrap();
    let in_libc = builder
        .add_address_location(Some(libc_mapping), 0x1100, &[line(leaf)])
        .unwrap();
    let unknown = builder.add_address_location(None, 0x77, &[]).unwrap();
    builder.function_location(unused).unwrap();
    let labels = [
        LabelSpec {
            key: "comm",
            value: LabelValue::Text("program"),
        },
        LabelSpec {
            key: "pid",
            value: LabelValue::Number {
                value: 42,
                unit: Some("pid"),
            },
        },
    ];
    builder
        .add_sample(&[in_libc, inlined], &[3, 30], &labels)
        .unwrap();
    builder
        .add_sample(&[unknown, inlined], &[1, 10], &[])
        .unwrap();
    let samples = builder.take_samples();
    let metadata = ProfileMetadata {
        time_nanos: 1_700_000_000_000_000_000,
        duration_nanos: 10_000_000_000,
        // "cpu" and "nanoseconds" are the samples' own strings, the comment is not.
        period: Some(("cpu".into(), "nanoseconds".into(), 1_000_000)),
        comments: vec!["an interval".into(), "cpu".into()],
        default_sample_type: Some("cpu".into()),
    };
    for main in [None, Some(program)] {
        let encoded = builder
            .encode_profile_of(&samples, &metadata, main)
            .unwrap();
        assert_eq!(encoded.samples(), 2);
        let profile = encoded.decode().unwrap();
        assert_well_formed(&profile);
        assert_eq!(
            encoded.as_bytes(),
            profile.encode_to_vec().as_slice(),
            "main mapping {main:?}"
        );
        // Each entry once, however many samples use it: the three locations, their
        // three functions and two mappings.
        assert_eq!(profile.location.len(), 3);
        assert_eq!(profile.function.len(), 3);
        assert_eq!(profile.mapping.len(), 2);
        assert!(!profile.string_table.iter().any(|text| text == "unused"));
        assert_eq!(
            profile
                .string_table
                .iter()
                .filter(|text| *text == "cpu")
                .count(),
            1
        );
        assert_eq!(profile.comment.len(), 2);
        let mut gzipped = Vec::new();
        encoded.write_gzip(&mut gzipped).unwrap();
        assert_eq!(read(&gzipped).unwrap(), profile);
    }
}

#[test]
fn samples_of_another_builder_are_refused() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let mut other = ProfileBuilder::new(&TYPES);
    let hot = function(&mut other, "hot");
    let location = other.function_location(hot).unwrap();
    other.add_sample(&[location], &[1, 1], &[]).unwrap();
    let foreign = other.take_samples();
    assert!(matches!(
        builder.profile_of(&foreign, &ProfileMetadata::default(), None),
        Err(PprofError::ForeignSamples)
    ));
    assert!(matches!(
        builder.new_samples().absorb(&foreign),
        Err(PprofError::ForeignSamples)
    ));
    assert!(builder.take_samples().is_empty());
}

#[test]
fn a_run_total_beyond_its_limit_folds_new_stacks_into_the_stand_in() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let full = function(&mut builder, "[full]");
    let stand_in = builder.function_location(full).unwrap();
    let mut total = builder.new_samples();
    total.set_limit(2, stand_in);
    let mut locations = Vec::new();
    for number in 0..4 {
        let function = function(&mut builder, &format!("f{number}"));
        let location = builder.function_location(function).unwrap();
        locations.push(location);
        builder.add_sample(&[location], &[1, 10], &[]).unwrap();
        let capped = total.absorb(&builder.take_samples()).unwrap();
        let expected: &[usize] = if number < 2 { &[] } else { &[0] };
        assert_eq!(capped, expected, "interval {number}");
    }
    assert_eq!(total.len(), 3, "two stacks and the stand-in");
    assert_eq!(total.over_limit(), &[2, 20]);
    // An interval mixing stacks the total has with new ones: only the new are capped,
    // and they are named by their place in the interval.
    for &location in [locations[3], locations[0], locations[2], locations[1]].iter() {
        builder.add_sample(&[location], &[1, 10], &[]).unwrap();
    }
    assert_eq!(total.absorb(&builder.take_samples()).unwrap(), [0, 2]);
    assert_eq!(total.over_limit(), &[4, 40]);
    let run = builder
        .profile_of(&total, &ProfileMetadata::default(), None)
        .unwrap();
    let names: Vec<Vec<String>> = resolved(&run).into_iter().map(|sample| sample.0).collect();
    assert!(names.contains(&vec!["[full]".to_owned(), "+0x0@".to_owned()]));
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

#[test]
fn named_samples_read_the_builders_names_as_the_profile_has_them() {
    let mut builder = ProfileBuilder::new(&TYPES);
    let libc_mapping = libc(&mut builder);
    let (outer, inlined, leaf) = (
        function(&mut builder, "outer"),
        function(&mut builder, "inlined"),
        function(&mut builder, "leaf"),
    );
    // A location whose code was inlined (leaf-most line first, as pprof lists them), a
    // plain one, one of the file with no symbol, and one with no mapping.
    let inlining = builder
        .add_address_location(Some(libc_mapping), 0x1100, &[line(inlined), line(outer)])
        .unwrap();
    let plain = builder
        .add_address_location(Some(libc_mapping), 0x1200, &[line(leaf)])
        .unwrap();
    let unsymbolized = builder
        .add_address_location(Some(libc_mapping), 0x1300, &[])
        .unwrap();
    let nowhere = builder.add_address_location(None, 0x9999, &[]).unwrap();
    let comm = |text| {
        [LabelSpec {
            key: "comm",
            value: LabelValue::Text(text),
        }]
    };
    builder
        .add_sample(&[plain, inlining], &[2, 20], &comm("worker"))
        .unwrap();
    builder
        .add_sample(&[unsymbolized, nowhere], &[1, 10], &[])
        .unwrap();
    let samples = builder.take_samples();
    let key = builder.label_key("comm").expect("an interned key");
    assert_eq!(builder.label_key("no such key"), None);
    let named: Vec<(Option<&str>, Vec<FrameName<'_>>, Vec<i64>)> = builder
        .named_samples(&samples)
        .unwrap()
        .map(|sample| {
            (
                sample.text_label(key),
                sample.frames_root_first().collect(),
                sample.values().to_vec(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            (
                Some("worker"),
                vec![
                    FrameName::Function("outer"),
                    FrameName::Function("inlined"),
                    FrameName::Function("leaf"),
                ],
                vec![2, 20],
            ),
            (
                None,
                vec![
                    FrameName::Unsymbolized { filename: None },
                    FrameName::Unsymbolized {
                        filename: Some("/lib/libc.so.6")
                    },
                ],
                vec![1, 10],
            ),
        ]
    );
    // The profile of the same samples names the same frames (its stacks leaf first).
    let profile = builder
        .profile_of(&samples, &ProfileMetadata::default(), None)
        .unwrap();
    let first = &resolved(&profile)
        .into_iter()
        .find(|(_, values, _)| values == &[2, 20])
        .unwrap()
        .0;
    assert_eq!(first[..2], ["leaf", "/lib/libc.so.6+0x1200@dead0bee"]);
    assert_eq!(first[2..4], ["inlined", "outer"]);
    let other = ProfileBuilder::new(&TYPES);
    assert!(matches!(
        other.named_samples(&samples).map(|_| ()),
        Err(PprofError::ForeignSamples)
    ));
}
