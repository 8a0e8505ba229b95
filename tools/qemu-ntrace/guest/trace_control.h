/*
 * trace_control.h: the RISC-V Trace Control Interface 1.0 registers and the discovery
 * table of rvperf's emulated trace block (docs/trace-device.md), for guest programs in
 * C. The Rust definition is userland/trace-control; tests/tests/trace_control_header.rs
 * checks that every value here is the same there.
 */
#ifndef RVPERF_TRACE_CONTROL_H
#define RVPERF_TRACE_CONTROL_H

/* Discovery table (offset 0 of the block). */
#define TC_MAGIC "RVTRACE1"
#define TC_TABLE_VERSION_OFFSET 0x08
#define TC_TABLE_COMPONENTS_OFFSET 0x0c
#define TC_TABLE_SIZE_OFFSET 0x10
#define TC_TABLE_SINK_OFFSET_OFFSET 0x18
#define TC_TABLE_SINK_SIZE_OFFSET 0x20
#define TC_TABLE_ENTRIES_OFFSET 0x40
#define TC_TABLE_ENTRY_SIZE 16
#define TC_COMPONENT_SIZE 0x1000

/* Component types (tr??Impl bits 11:8). */
#define TC_TYPE_ENCODER 1
#define TC_TYPE_FUNNEL 8
#define TC_TYPE_RAM_SINK 9

/* Registers every component has. */
#define TC_CONTROL 0x000
#define TC_IMPL 0x004
#define TC_ACTIVE (1u << 0)
#define TC_ENABLE (1u << 1)
#define TC_EMPTY (1u << 3)
#define TC_IMPL_VERSION_MAJOR(impl) ((impl) & 0xfu)
#define TC_IMPL_VERSION_MINOR(impl) (((impl) >> 4) & 0xfu)
#define TC_IMPL_TYPE(impl) (((impl) >> 8) & 0xfu)

/* Trace encoder. */
#define TC_TE_INST_FEATURES 0x008
#define TC_TE_INST_FILTERS 0x00c
#define TC_TE_TS_CONTROL 0x040
#define TC_TE_TS_COUNTER_LOW 0x048
#define TC_TE_TS_COUNTER_HIGH 0x04c
#define TC_TE_FILTER_CONTROL(i) (0x400 + 0x20 * (i))
#define TC_TE_FILTER_MATCH_INST(i) (0x404 + 0x20 * (i))

#define TC_TE_INST_TRACING (1u << 2)
#define TC_TE_INST_MODE_SHIFT 4
#define TC_TE_INST_MODE_MASK (7u << 4)
#define TC_TE_INST_MODE_BTM 3u
#define TC_TE_INST_MODE_HTM 6u
#define TC_TE_CONTEXT (1u << 9)
#define TC_TE_INST_STALL_OR_OVERFLOW (1u << 12)
#define TC_TE_INHIBIT_SRC (1u << 15)
#define TC_TE_INST_SYNC_MODE_SHIFT 16
#define TC_TE_INST_SYNC_MODE_MASK (3u << 16)
#define TC_TE_INST_SYNC_MAX_SHIFT 20
#define TC_TE_INST_SYNC_MAX_MASK (0xfu << 20)
#define TC_TE_FORMAT_SHIFT 24
#define TC_TE_FORMAT_MASK (7u << 24)
#define TC_TE_FORMAT_NTRACE 1u

#define TC_TE_EN_SEQUENTIAL_JUMP (1u << 2)
#define TC_TE_EN_IMPLICIT_RETURN (1u << 3)
#define TC_TE_IMPLICIT_RETURN_MODE_SHIFT 6
#define TC_TE_EN_REPEATED_HISTORY (1u << 8)
#define TC_TE_EN_ALL_JUMPS (1u << 9)
#define TC_TE_EXTEND_ADDR_MSB (1u << 10)
#define TC_TE_SRC_ID_SHIFT 16
#define TC_TE_SRC_ID_MASK (0xfffu << 16)
#define TC_TE_SRC_BITS_SHIFT 28
#define TC_TE_SRC_BITS_MASK (0xfu << 28)

#define TC_TE_FILTER_ENABLE (1u << 0)
#define TC_TE_FILTER_MATCH_PRIVILEGE (1u << 1)

#define TC_TS_ACTIVE (1u << 0)
#define TC_TS_COUNT (1u << 1)
#define TC_TS_RESET (1u << 2)
#define TC_TS_MODE_SHIFT 4
#define TC_TS_MODE_INTERNAL_SYSTEM 2u
#define TC_TS_PRESCALE_SHIFT 8
#define TC_TS_ENABLE (1u << 15)
#define TC_TS_WIDTH_SHIFT 24

/* Trace funnel. */
#define TC_FUNNEL_DISABLE_INPUT 0x008

/* RAM sink. */
#define TC_RAM_START_LOW 0x010
#define TC_RAM_START_HIGH 0x014
#define TC_RAM_LIMIT_LOW 0x018
#define TC_RAM_LIMIT_HIGH 0x01c
#define TC_RAM_WP_LOW 0x020
#define TC_RAM_WP_HIGH 0x024
#define TC_RAM_MODE_SMEM (1u << 4)
#define TC_RAM_STOP_ON_WRAP (1u << 8)
#define TC_RAM_WRAP (1u << 0)
#define TC_RAM_HAS_SRAM (1u << 12)
#define TC_RAM_HAS_SMEM (1u << 13)

#endif
