//! What every trace component has: a 4 KiB register block starting with `tr??Control`
//! and `tr??Impl` (specification, "Trace Component Register Map" and "Versioning of
//! Components").

/// Size of one component's register block; component bases are aligned to it.
pub const COMPONENT_SIZE: usize = 0x1000;

/// `tr??Control`: the component's main control register.
pub const CONTROL: usize = 0x000;
/// `tr??Impl`: version and type of the component.
pub const IMPLEMENTATION: usize = 0x004;

/// Fields `tr??Control` has in every component.
pub mod control {
    use crate::Field;

    /// `tr??Active`: 0 holds the component in reset.
    pub const ACTIVE: Field = Field::bit(0);
    /// `tr??Enable`: the component passes trace; 1 → 0 flushes what it holds.
    pub const ENABLE: Field = Field::bit(1);
    /// `tr??Empty` (read-only): 1 when the component holds no trace.
    pub const EMPTY: Field = Field::bit(3);
}

/// Fields `tr??Impl` has in every component.
pub mod implementation {
    use crate::Field;

    /// `tr??VerMajor`: 1 for this specification, 0 for the pre-ratified interface.
    pub const VERSION_MAJOR: Field = Field::new(0, 4);
    /// `tr??VerMinor`.
    pub const VERSION_MINOR: Field = Field::new(4, 4);
    /// `tr??CompType`: a [`ComponentType`](crate::ComponentType).
    pub const COMPONENT_TYPE: Field = Field::new(8, 4);
    /// Bits 31:24, reserved for vendor-specific details.
    pub const VENDOR: Field = Field::new(24, 8);
}

/// `tr??CompType`: what a component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ComponentType {
    /// TRCOMP_ENCODER.
    Encoder = 0x1,
    /// TRCOMP_FUNNEL.
    Funnel = 0x8,
    /// TRCOMP_RAMSINK.
    RamSink = 0x9,
    /// TRCOMP_PIBSINK.
    PibSink = 0xa,
    /// TRCOMP_ATBBRIDGE.
    AtbBridge = 0xe,
}

impl ComponentType {
    /// The type a `tr??CompType` value names, if the specification defines it.
    pub const fn from_value(value: u32) -> Option<ComponentType> {
        match value {
            0x1 => Some(ComponentType::Encoder),
            0x8 => Some(ComponentType::Funnel),
            0x9 => Some(ComponentType::RamSink),
            0xa => Some(ComponentType::PibSink),
            0xe => Some(ComponentType::AtbBridge),
            _ => None,
        }
    }

    /// The `tr??CompType` value.
    pub const fn value(self) -> u32 {
        self as u32
    }
}

/// A component version (`tr??VerMajor`.`tr??VerMinor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    pub major: u8,
    pub minor: u8,
}

impl Version {
    /// 1.0, the version of every component of this specification.
    pub const V1_0: Version = Version { major: 1, minor: 0 };

    /// The version in a `tr??Impl` value.
    pub const fn from_implementation(implementation: u32) -> Version {
        Version {
            major: implementation::VERSION_MAJOR.extract(implementation) as u8,
            minor: implementation::VERSION_MINOR.extract(implementation) as u8,
        }
    }
}

/// The `tr??Impl` fields every component has: version and type (other bits 0).
pub const fn implementation_value(component_type: ComponentType, version: Version) -> u32 {
    let value = implementation::VERSION_MAJOR.value(version.major as u32);
    let value = implementation::VERSION_MINOR.insert(value, version.minor as u32);
    implementation::COMPONENT_TYPE.insert(value, component_type.value())
}

/// The component type a `tr??Impl` value names (`None` for a type the specification does
/// not define).
pub const fn implementation_type(implementation: u32) -> Option<ComponentType> {
    ComponentType::from_value(implementation::COMPONENT_TYPE.extract(implementation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implementation_values_of_the_specification() {
        // trTeImpl of a 1.0 encoder without protocol fields: 0x101.
        assert_eq!(
            implementation_value(ComponentType::Encoder, Version::V1_0),
            0x101
        );
        assert_eq!(
            implementation_value(ComponentType::Funnel, Version::V1_0),
            0x801
        );
        assert_eq!(
            implementation_value(ComponentType::RamSink, Version { major: 1, minor: 2 }),
            0x921
        );
        assert_eq!(
            implementation_type(0x2001_0101),
            Some(ComponentType::Encoder)
        );
        assert_eq!(implementation_type(0x0000_0301), None);
        assert_eq!(
            Version::from_implementation(0x921),
            Version { major: 1, minor: 2 }
        );
    }

    #[test]
    fn component_types_round_trip() {
        for value in 0..16 {
            if let Some(component_type) = ComponentType::from_value(value) {
                assert_eq!(component_type.value(), value);
            }
        }
        assert_eq!(ComponentType::from_value(0xa), Some(ComponentType::PibSink));
        assert_eq!(ComponentType::from_value(0x2), None);
    }
}
