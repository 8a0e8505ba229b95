// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rvtrace_logic`: the pure logic of the rvtrace driver, in the kernel it
//! runs in: the shared register map's fields, the discovery table's parser, the sink's
//! wrap arithmetic and the configuration plan. The same source files as the driver.

use kernel::prelude::*;

// The register map, the ABI and the plan (shared.rs says why they are shared).
include!("shared.rs");

struct RvTraceTest;

impl kernel::Module for RvTraceTest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RvTraceTest)
    }
}

module! {
    type: RvTraceTest,
    name: "rvtrace_test",
    authors: ["rvperf"],
    description: "KUnit suite of the rvtrace driver's logic",
    license: "GPL",
}

#[kunit_tests(rvtrace_logic)]
mod tests {
    use super::component::{implementation_value, ComponentType, Version};
    use super::discovery::{offset, ComponentEntry, DiscoveryError, DiscoveryTable, NO_HART};
    use super::ram_sink::WriteProgress;
    use super::*;

    fn facts() -> plan::BlockFacts {
        plan::BlockFacts {
            harts: 0b11,
            has_funnel: true,
            sink_size: 1 << 20,
            return_stack_depth: 32,
            has_context_register: true,
        }
    }

    fn config() -> uapi::rvtrace_config {
        uapi::rvtrace_config {
            size: core::mem::size_of::<uapi::rvtrace_config>() as u32,
            mode: uapi::RVTRACE_MODE_BTM,
            features: uapi::RVTRACE_FEATURE_IMPLICIT_RETURN | uapi::RVTRACE_FEATURE_TIMESTAMPS,
            privileges: uapi::RVTRACE_PRIVILEGE_USER,
            sync_max: 6,
            timestamp_prescale: 1,
            harts: 0b01,
            buffer_bytes: 65536,
            ..Default::default()
        }
    }

    #[test]
    fn register_fields_encode_in_place() {
        let control =
            encoder::control::INSTRUCTION_MODE.insert(0, encoder::instruction_mode::BASELINE);
        assert_eq!(control, 0x30);
        assert_eq!(
            encoder::control::INSTRUCTION_SYNC_MAX.insert(u32::MAX, 0),
            0xff0f_ffff
        );
        assert_eq!(ram_sink::write_pointer_low::WRAP.mask(), 1);
        assert_eq!(ram_sink::join_address(0x1000, 0x1), 0x1_0000_1000);
    }

    #[test]
    fn a_plan_holds_the_register_values_of_a_configuration() {
        let plan = plan::plan(&config(), &facts()).unwrap();
        // Active, BTM, N-Trace, sync mode 3 (half-words) every 2^(6+4).
        assert_eq!(plan.encoder_control, 0x0163_0031);
        // Implicit return; one hart traced: no SRC bits.
        assert_eq!(plan.encoder_features, 0x8);
        assert_eq!(plan.features_of(1), 0x8);
        assert_eq!(
            (plan.filters, plan.filter_control, plan.filter_match),
            (1, 0x3, 0x1)
        );
        // Active, counting, internal system time, prescale 1; then enabled.
        assert_eq!(plan.timestamp_control, 0x123);
        assert_eq!(plan.timestamp_enabled(), Some(0x8123));
        // Active, SMEM, no stop on wrap.
        assert_eq!(plan.sink_control, 0x11);
        assert_eq!(plan.buffer_bytes, 65536);
        assert!(!plan.task_context);
    }

    #[test]
    fn a_task_context_holds_the_tid_and_the_exec_generation() {
        // The idle task.
        assert_eq!(plan::task_context(0, 0), 0);
        assert_eq!(plan::task_context(1234, 1), 1 << 22 | 1234);
        // The generation counts modulo 1024.
        assert_eq!(plan::task_context(7, 1025), 1 << 22 | 7);
        assert_eq!(plan::task_context((1 << 22) - 1, 0), 0x3f_ffff);
        assert_eq!(
            plan::task_context(1 << 22, 0),
            uapi::RVTRACE_CONTEXT_UNKNOWN
        );
    }

    #[test]
    fn task_contexts_imply_ownership_messages() {
        let mut tasks = config();
        tasks.features |= uapi::RVTRACE_FEATURE_CONTEXT_TASK;
        let plan = plan::plan(&tasks, &facts()).unwrap();
        assert!(plan.task_context);
        // trTeContext (bit 9) besides the control of the plain configuration.
        assert_eq!(plan.encoder_control, 0x0163_0231);
    }

    #[test]
    fn two_harts_through_a_funnel_number_their_messages() {
        let mut two = config();
        two.harts = 0;
        two.features |= uapi::RVTRACE_FEATURE_STOP_ON_WRAP;
        let plan = plan::plan(&two, &facts()).unwrap();
        assert_eq!((plan.harts, plan.source_bits), (0b11, 1));
        assert_eq!(plan.features_of(1), 0x1001_0008);
        assert_eq!(plan.sink_control, 0x111);
    }

    #[test]
    fn a_plan_refuses_what_the_block_cannot_do() {
        let block = facts();
        let refused = |change: &dyn Fn(&mut uapi::rvtrace_config)| {
            let mut bad = config();
            change(&mut bad);
            plan::plan(&bad, &block).unwrap_err()
        };
        assert_eq!(refused(&|c| c.size = 8), plan::PlanError::WrongSize);
        assert_eq!(refused(&|c| c.mode = 4), plan::PlanError::UnknownMode);
        assert_eq!(
            refused(&|c| c.features = 1 << 9),
            plan::PlanError::UnknownBits
        );
        assert_eq!(
            refused(&|c| c.privileges = 1 << 2),
            plan::PlanError::UnknownBits
        );
        assert_eq!(
            refused(&|c| c.reserved[3] = 1),
            plan::PlanError::UnknownBits
        );
        assert_eq!(refused(&|c| c.sync_max = 16), plan::PlanError::OutOfRange);
        assert_eq!(
            refused(&|c| c.timestamp_prescale = 4),
            plan::PlanError::OutOfRange
        );
        assert_eq!(refused(&|c| c.harts = 0b100), plan::PlanError::NoSuchHart);
        assert_eq!(
            refused(&|c| c.buffer_bytes = 4098),
            plan::PlanError::BadBufferSize
        );
        assert_eq!(
            refused(&|c| c.buffer_bytes = 2048),
            plan::PlanError::BadBufferSize
        );
        assert_eq!(
            refused(&|c| c.buffer_bytes = 2 << 20),
            plan::PlanError::BadBufferSize
        );
        let no_stack = plan::BlockFacts {
            return_stack_depth: 0,
            ..block
        };
        assert_eq!(
            plan::plan(&config(), &no_stack).unwrap_err(),
            plan::PlanError::Unsupported
        );
        let no_context_register = plan::BlockFacts {
            has_context_register: false,
            ..block
        };
        let mut tasks = config();
        tasks.features |= uapi::RVTRACE_FEATURE_CONTEXT_TASK;
        assert_eq!(
            plan::plan(&tasks, &no_context_register).unwrap_err(),
            plan::PlanError::Unsupported
        );
    }

    fn table_bytes() -> KVec<u8> {
        let mut table = DiscoveryTable::new(0x10_0000, 0x3000, 0xf_d000);
        for (hart, registers) in [(0, 0x1000), (1, 0x2000)] {
            table
                .push(ComponentEntry {
                    component_type: ComponentType::Encoder,
                    implementation: implementation_value(ComponentType::Encoder, Version::V1_0),
                    registers,
                    hart: Some(hart),
                })
                .unwrap();
        }
        let mut bytes = KVec::new();
        bytes.resize(4096, 0, GFP_KERNEL).unwrap();
        let written = table.write(&mut bytes).unwrap();
        assert!(written <= 4096);
        bytes
    }

    #[test]
    fn the_discovery_table_parses_and_names_the_offset_at_fault() {
        let bytes = table_bytes();
        let table = DiscoveryTable::parse(&bytes).unwrap();
        assert_eq!(table.encoders().count(), 2);
        assert_eq!(table.encoder(1).map(|entry| entry.registers), Some(0x2000));
        assert_eq!(table.sink_offset, 0x3000);
        let mut bad = table_bytes();
        bad[0] = b'X';
        assert_eq!(
            DiscoveryTable::parse(&bad),
            Err(DiscoveryError::BadMagic {
                offset: offset::MAGIC
            })
        );
        let mut bad = table_bytes();
        bad[offset::VERSION] = 2;
        assert!(matches!(
            DiscoveryTable::parse(&bad),
            Err(DiscoveryError::UnsupportedVersion {
                offset: offset::VERSION,
                version: 2
            })
        ));
        let _ = NO_HART;
    }

    #[test]
    fn the_sink_progress_counts_wraps_laps_and_lost_bytes() {
        let mut progress = WriteProgress::new(0x3000, 0x3ffc).unwrap();
        assert_eq!(progress.observe(0x3f00, false), Ok(0xf00));
        assert_eq!(progress.observe(0x3100, true), Ok(0x200));
        assert_eq!((progress.wraps(), progress.bytes_written()), (1, 0x1100));
        let unread = progress.unread(0xf00);
        assert_eq!(
            (unread.lost, unread.first, unread.second),
            (0, 0xf00..0x1000, 0..0x100)
        );
        let unread = progress.unread(0);
        assert_eq!(
            (unread.lost, unread.first, unread.second),
            (0x100, 0x100..0x1000, 0..0x100)
        );
        assert!(progress.observe(0x4000, true).is_err());
    }

    #[test]
    fn the_sink_wrap_count_counts_laps_the_driver_did_not_see() {
        let mut progress = WriteProgress::new(0x3000, 0x3ffc).unwrap();
        assert_eq!(progress.observe_counted(0x3800, 0), Ok(0x800));
        // Five wraps since: to the end, four whole buffers, then 0x100 from the start.
        assert_eq!(
            progress.observe_counted(0x3100, 5),
            Ok(0x800 + 0x4000 + 0x100)
        );
        assert_eq!((progress.wraps(), progress.bytes_written()), (5, 0x5100));
        let unread = progress.unread(0x800);
        assert_eq!(
            (unread.lost, unread.first, unread.second),
            (0x3900, 0x100..0x1000, 0..0x100)
        );
    }
}
