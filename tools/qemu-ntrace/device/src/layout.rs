//! Where things are in the trace block (`docs/trace-device.md`, "Layout"): the discovery
//! table's page, one register page per component, then the RAM sink's memory.

use std::ops::Range;

use trace_control::discovery::{ComponentEntry, DiscoveryTable, TABLE_SIZE};
use trace_control::encoder::implementation::MAX_RETURN_STACK_DEPTH;
use trace_control::{ComponentType, COMPONENT_SIZE};

use crate::{encoder, funnel, sink};

/// The most harts a block traces. The funnel has an input per hart and
/// `trFunnelDisInput` room for 16; 8 is what the test guest needs.
pub const MAX_HARTS: usize = 8;

/// The smallest sink memory a block accepts: one page.
pub const MIN_SINK_SIZE: usize = 0x1000;

/// What the emulated block looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockConfig {
    /// Harts traced, each with its encoder: 1..=[`MAX_HARTS`]. With more than one, a
    /// funnel merges their messages.
    pub harts: usize,
    /// Size of the whole block in bytes (the shared memory file's size): a multiple of
    /// 4 KiB with room for the table, the register pages and at least
    /// [`MIN_SINK_SIZE`] of sink memory.
    pub size: usize,
    /// Depth of the encoders' implicit-return stack (`trTeImpl` bits 30:24), at most
    /// 127; 0: no implicit returns (`trTeInstEnImplicitReturn` reads 0).
    pub return_stack_depth: u8,
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            harts: 1,
            size: 16 << 20,
            return_stack_depth: 32,
        }
    }
}

/// Why a block cannot be laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    #[error("{harts} harts: the trace block has an encoder for 1 to {MAX_HARTS} harts")]
    Harts { harts: usize },
    #[error("trace block size {size:#x} is not a multiple of 4 KiB of at least {minimum:#x} (table, registers, one page of sink memory)")]
    Size { size: usize, minimum: usize },
    #[error("trace block of {size:#x} bytes does not fit in {memory:#x} bytes of shared memory")]
    MemoryTooSmall { size: usize, memory: usize },
    #[error("return stack depth {depth}: trTeImpl holds 0 to {MAX_RETURN_STACK_DEPTH}")]
    ReturnStackDepth { depth: u8 },
}

/// Offsets of the table, the components' register pages and the sink memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    harts: usize,
    size: usize,
}

impl Layout {
    /// The layout `config` describes.
    pub fn new(config: &BlockConfig) -> Result<Layout, LayoutError> {
        if !(1..=MAX_HARTS).contains(&config.harts) {
            return Err(LayoutError::Harts {
                harts: config.harts,
            });
        }
        if u32::from(config.return_stack_depth) > MAX_RETURN_STACK_DEPTH {
            return Err(LayoutError::ReturnStackDepth {
                depth: config.return_stack_depth,
            });
        }
        let layout = Layout {
            harts: config.harts,
            size: config.size,
        };
        let minimum = layout.sink_offset() + MIN_SINK_SIZE;
        if config.size % COMPONENT_SIZE != 0 || config.size < minimum {
            return Err(LayoutError::Size {
                size: config.size,
                minimum,
            });
        }
        Ok(layout)
    }

    /// Harts, one encoder each.
    pub fn harts(&self) -> usize {
        self.harts
    }

    /// Size of the whole block.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Components: the encoders, the funnel if there is one, the sink.
    pub fn component_count(&self) -> usize {
        self.harts + usize::from(self.has_funnel()) + 1
    }

    /// Whether there is a funnel (more than one hart).
    pub fn has_funnel(&self) -> bool {
        self.harts > 1
    }

    /// Register page of component `index` in table order.
    fn component(index: usize) -> usize {
        TABLE_SIZE + COMPONENT_SIZE * index
    }

    /// Register page of `hart`'s encoder.
    ///
    /// # Panics
    ///
    /// If `hart` is not below [`Self::harts`].
    pub fn encoder(&self, hart: usize) -> usize {
        assert!(
            hart < self.harts,
            "hart {hart} of a block of {} harts",
            self.harts
        );
        Layout::component(hart)
    }

    /// Register page of the funnel.
    pub fn funnel(&self) -> Option<usize> {
        self.has_funnel().then(|| Layout::component(self.harts))
    }

    /// Register page of the RAM sink.
    pub fn ram_sink(&self) -> usize {
        Layout::component(self.component_count() - 1)
    }

    fn sink_offset(&self) -> usize {
        Layout::component(self.component_count())
    }

    /// The sink's memory, to the end of the block; its offsets are the addresses of
    /// `trRamStart`, `trRamLimit` and `trRamWP`.
    pub fn sink_memory(&self) -> Range<usize> {
        self.sink_offset()..self.size
    }

    /// The discovery table of this block.
    pub fn discovery_table(&self, return_stack_depth: u8) -> DiscoveryTable {
        let sink_memory = self.sink_memory();
        let mut table = DiscoveryTable::new(
            self.size as u64,
            sink_memory.start as u64,
            sink_memory.len() as u64,
        );
        let mut components = Vec::with_capacity(self.component_count());
        for hart in 0..self.harts {
            components.push(ComponentEntry {
                component_type: ComponentType::Encoder,
                implementation: encoder::implementation(return_stack_depth),
                registers: self.encoder(hart) as u32,
                hart: Some(hart as u32),
            });
        }
        if let Some(funnel) = self.funnel() {
            components.push(ComponentEntry {
                component_type: ComponentType::Funnel,
                implementation: funnel::IMPLEMENTATION,
                registers: funnel as u32,
                hart: None,
            });
        }
        components.push(ComponentEntry {
            component_type: ComponentType::RamSink,
            implementation: sink::IMPLEMENTATION,
            registers: self.ram_sink() as u32,
            hart: None,
        });
        for component in components {
            // At most MAX_HARTS + 2 components, far below the table's capacity.
            table
                .push(component)
                .expect("the table holds every component of a block");
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(harts: usize, size: usize) -> BlockConfig {
        BlockConfig {
            harts,
            size,
            ..BlockConfig::default()
        }
    }

    #[test]
    fn components_in_table_order_then_the_sink_memory() {
        let one = Layout::new(&config(1, 0x10_0000)).unwrap();
        assert_eq!(
            (one.encoder(0), one.funnel(), one.ram_sink()),
            (0x1000, None, 0x2000)
        );
        assert_eq!(one.sink_memory(), 0x3000..0x10_0000);
        let two = Layout::new(&config(2, 0x10_0000)).unwrap();
        assert_eq!(
            (two.encoder(1), two.funnel(), two.ram_sink()),
            (0x2000, Some(0x3000), 0x4000)
        );
        assert_eq!(two.sink_memory(), 0x5000..0x10_0000);
        let eight = Layout::new(&config(8, 16 << 20)).unwrap();
        assert_eq!(eight.sink_memory().start, 0xb000);
        assert_eq!(eight.component_count(), 10);
    }

    #[test]
    fn refused_configurations() {
        assert_eq!(
            Layout::new(&config(0, 0x10_0000)),
            Err(LayoutError::Harts { harts: 0 })
        );
        assert_eq!(
            Layout::new(&config(9, 0x10_0000)),
            Err(LayoutError::Harts { harts: 9 })
        );
        assert_eq!(
            Layout::new(&config(2, 0x10_0800)),
            Err(LayoutError::Size {
                size: 0x10_0800,
                minimum: 0x6000
            })
        );
        assert_eq!(
            Layout::new(&config(2, 0x5000)),
            Err(LayoutError::Size {
                size: 0x5000,
                minimum: 0x6000
            })
        );
        assert!(Layout::new(&config(2, 0x6000)).is_ok());
    }

    #[test]
    fn the_discovery_table_describes_the_layout() {
        let layout = Layout::new(&config(2, 0x10_0000)).unwrap();
        let table = layout.discovery_table(32);
        let mut page = [0u8; TABLE_SIZE];
        let written = table.write(&mut page).unwrap();
        let parsed = DiscoveryTable::parse(&page[..written]).unwrap();
        assert_eq!(
            (parsed.sink_offset, parsed.sink_size, parsed.block_size),
            (0x5000, 0xf_b000, 0x10_0000)
        );
        assert_eq!(parsed.encoder(1).unwrap().registers, 0x2000);
        assert_eq!(parsed.encoder(1).unwrap().implementation, 0xa001_0101);
        assert_eq!(parsed.funnel().unwrap().implementation, 0x801);
        assert_eq!(parsed.ram_sink().unwrap().implementation, 0x0100_2901);
        assert_eq!(parsed.components().len(), 4);
    }
}
