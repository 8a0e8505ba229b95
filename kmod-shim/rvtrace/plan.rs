// SPDX-License-Identifier: GPL-2.0

//! From a user's `struct rvtrace_config` to the register values the driver writes: pure
//! logic, no register access, so the KUnit suite (`rvtrace_test.rs`) checks it whole.
//! Field positions come from the shared register map (`userland/trace-control`).

use crate::uapi;
use crate::{encoder, ram_sink, timestamp};

/// What the driver knows of the block, from its discovery table and `Impl` registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockFacts {
    /// Bit i: hart i has an encoder.
    pub(crate) harts: u64,
    /// The block merges its encoders through a funnel.
    pub(crate) has_funnel: bool,
    /// Bytes of sink memory.
    pub(crate) sink_size: u64,
    /// The encoders' implicit-return stack depth (0: no implicit return).
    pub(crate) return_stack_depth: u32,
    /// Every encoder has rvperf's stand-in context register (`encoder::CONTEXT`).
    pub(crate) has_context_register: bool,
}

/// Why a configuration is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlanError {
    /// `size` is not `sizeof(struct rvtrace_config)`.
    WrongSize,
    /// A reserved field or an unknown feature or privilege bit is set.
    UnknownBits,
    /// `mode` is neither BTM nor HTM.
    UnknownMode,
    /// `sync_max` or `timestamp_prescale` is out of range.
    OutOfRange,
    /// A hart asked for has no encoder.
    NoSuchHart,
    /// `buffer_bytes` is not a multiple of 4, below the minimum or above the sink memory.
    BadBufferSize,
    /// The block cannot do what is asked (implicit return without a return stack, task
    /// contexts without a context register).
    Unsupported,
}

/// The smallest buffer a configuration may ask for: one page, so that a wrap is not
/// more frequent than the driver can see.
pub(crate) const MIN_BUFFER_BYTES: u64 = 4096;

/// The register values of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Bit i: trace hart i.
    pub(crate) harts: u64,
    /// `trTeControl` with trTeActive and the mode, format, sync and context fields;
    /// trTeEnable and trTeInstTracing are set by the start sequence.
    pub(crate) encoder_control: u32,
    /// `trTeInstFeatures` without trTeSrcID (each encoder's is its hart).
    pub(crate) encoder_features: u32,
    /// Bits of the SRC field (0 when one encoder is traced).
    pub(crate) source_bits: u32,
    /// `trTeInstFilters`, `trTeFilter0Control`, `trTeFilter0MatchInst`.
    pub(crate) filters: u32,
    pub(crate) filter_control: u32,
    pub(crate) filter_match: u32,
    /// `trTsControl` before trTsEnable (0: no timestamps).
    pub(crate) timestamp_control: u32,
    /// `trRamControl` before trRamEnable.
    pub(crate) sink_control: u32,
    /// Bytes of sink memory to use, from its start.
    pub(crate) buffer_bytes: u64,
    /// Write the running task to each traced hart's context register at every context
    /// switch and exec (`RVTRACE_FEATURE_CONTEXT_TASK`).
    pub(crate) task_context: bool,
}

impl Plan {
    /// `trTeInstFeatures` of the encoder of `hart`.
    pub(crate) fn features_of(&self, hart: u32) -> u32 {
        let source = if self.source_bits == 0 { 0 } else { hart };
        encoder::instruction_features::SOURCE_ID.insert(self.encoder_features, source)
    }

    /// The timestamp unit's control with trTsEnable.
    pub(crate) fn timestamp_enabled(&self) -> Option<u32> {
        if self.timestamp_control == 0 {
            None
        } else {
            Some(timestamp::control::ENABLE.with(self.timestamp_control, true))
        }
    }
}

const KNOWN_PRIVILEGES: u32 = uapi::RVTRACE_PRIVILEGE_USER
    | uapi::RVTRACE_PRIVILEGE_SUPERVISOR
    | uapi::RVTRACE_PRIVILEGE_MACHINE;

/// Bits needed to number harts up to `highest`.
fn bits_for(highest: u32) -> u32 {
    (u32::BITS - highest.leading_zeros()).max(1)
}

/// Checks `config` against the block and works out every register value.
pub(crate) fn plan(config: &uapi::rvtrace_config, block: &BlockFacts) -> Result<Plan, PlanError> {
    use encoder::{control, instruction_features as features};

    if config.size as usize != core::mem::size_of::<uapi::rvtrace_config>() {
        return Err(PlanError::WrongSize);
    }
    if config.reserved.iter().any(|word| *word != 0)
        || config.features & !uapi::RVTRACE_FEATURES_ALL != 0
        || config.privileges & !KNOWN_PRIVILEGES != 0
    {
        return Err(PlanError::UnknownBits);
    }
    let mode = match config.mode {
        uapi::RVTRACE_MODE_BTM => encoder::instruction_mode::BASELINE,
        uapi::RVTRACE_MODE_HTM => encoder::instruction_mode::OPTIMIZED,
        _ => return Err(PlanError::UnknownMode),
    };
    if (config.sync_max != uapi::RVTRACE_SYNC_NONE
        && config.sync_max > control::INSTRUCTION_SYNC_MAX.max_value())
        || config.timestamp_prescale > timestamp::control::PRESCALE.max_value()
    {
        return Err(PlanError::OutOfRange);
    }
    let harts = if config.harts == 0 {
        block.harts
    } else {
        config.harts
    };
    if harts & !block.harts != 0 || harts == 0 {
        return Err(PlanError::NoSuchHart);
    }
    let buffer_bytes = if config.buffer_bytes == 0 {
        block.sink_size
    } else {
        config.buffer_bytes
    };
    if buffer_bytes % ram_sink::ADDRESS_ALIGNMENT != 0
        || buffer_bytes < MIN_BUFFER_BYTES
        || buffer_bytes > block.sink_size
    {
        return Err(PlanError::BadBufferSize);
    }
    let wants = |feature: u32| config.features & feature != 0;
    if wants(uapi::RVTRACE_FEATURE_IMPLICIT_RETURN) && block.return_stack_depth == 0 {
        return Err(PlanError::Unsupported);
    }
    let task_context = wants(uapi::RVTRACE_FEATURE_CONTEXT_TASK);
    if task_context && !block.has_context_register {
        return Err(PlanError::Unsupported);
    }

    let mut encoder_control = control::ACTIVE.value(1);
    encoder_control = control::INSTRUCTION_MODE.insert(encoder_control, mode);
    encoder_control = control::FORMAT.insert(encoder_control, encoder::format::N_TRACE);
    // Task contexts are reported in Ownership messages: they imply trTeContext.
    encoder_control = control::CONTEXT.with(
        encoder_control,
        wants(uapi::RVTRACE_FEATURE_CONTEXT) || task_context,
    );
    if config.sync_max != uapi::RVTRACE_SYNC_NONE {
        encoder_control =
            control::INSTRUCTION_SYNC_MODE.insert(encoder_control, encoder::sync_mode::HALFWORDS);
        encoder_control = control::INSTRUCTION_SYNC_MAX.insert(encoder_control, config.sync_max);
    }

    // With several encoders through a funnel, each message names its hart in SRC.
    let source_bits = if block.has_funnel && harts.count_ones() > 1 {
        bits_for(63 - harts.leading_zeros())
    } else {
        0
    };
    let mut encoder_features = 0;
    for (feature, field) in [
        (
            uapi::RVTRACE_FEATURE_IMPLICIT_RETURN,
            features::ENABLE_IMPLICIT_RETURN,
        ),
        (
            uapi::RVTRACE_FEATURE_REPEATED_HISTORY,
            features::ENABLE_REPEATED_HISTORY,
        ),
        (uapi::RVTRACE_FEATURE_ALL_JUMPS, features::ENABLE_ALL_JUMPS),
        (
            uapi::RVTRACE_FEATURE_SEQUENTIAL_JUMPS,
            features::ENABLE_SEQUENTIAL_JUMP,
        ),
        (
            uapi::RVTRACE_FEATURE_MSB_EXTENSION,
            features::EXTEND_ADDRESS_MSB,
        ),
    ] {
        encoder_features = field.with(encoder_features, wants(feature));
    }
    encoder_features = features::SOURCE_BITS.insert(encoder_features, source_bits);

    let (filters, filter_control, filter_match) = if config.privileges == 0 {
        (0, 0, 0)
    } else {
        let filter_control = encoder::filter_control::ENABLE.value(1)
            | encoder::filter_control::MATCH_PRIVILEGE.value(1);
        let filter_match =
            encoder::filter_match_instruction::MATCH_CHOICE_PRIVILEGE.value(config.privileges);
        (1, filter_control, filter_match)
    };

    let timestamp_control = if wants(uapi::RVTRACE_FEATURE_TIMESTAMPS) {
        let mut value = timestamp::control::ACTIVE.value(1) | timestamp::control::COUNT.value(1);
        value = timestamp::control::MODE.insert(value, timestamp::mode::INTERNAL_SYSTEM);
        timestamp::control::PRESCALE.insert(value, config.timestamp_prescale)
    } else {
        0
    };

    let mut sink_control = ram_sink::control::ACTIVE.value(1);
    sink_control = ram_sink::control::MODE.insert(sink_control, ram_sink::mode::SMEM);
    sink_control = ram_sink::control::STOP_ON_WRAP
        .with(sink_control, wants(uapi::RVTRACE_FEATURE_STOP_ON_WRAP));

    Ok(Plan {
        harts,
        encoder_control,
        encoder_features,
        source_bits,
        filters,
        filter_control,
        filter_match,
        timestamp_control,
        sink_control,
        buffer_bytes,
        task_context,
    })
}

/// The context value of `RVTRACE_FEATURE_CONTEXT_TASK` for thread `tid` in exec
/// generation `generation` (counted modulo 2^10); all ones (`RVTRACE_CONTEXT_UNKNOWN`)
/// for a thread id that does not fit.
pub(crate) fn task_context(tid: u32, generation: u32) -> u32 {
    let tid_mask = (1u32 << uapi::RVTRACE_CONTEXT_TID_BITS) - 1;
    let generation_mask = (1u32 << uapi::RVTRACE_CONTEXT_EXEC_BITS) - 1;
    if tid & !tid_mask != 0 {
        return uapi::RVTRACE_CONTEXT_UNKNOWN;
    }
    (generation & generation_mask) << uapi::RVTRACE_CONTEXT_TID_BITS | tid
}
