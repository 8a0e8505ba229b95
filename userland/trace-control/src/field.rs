/// A bit field of a 32-bit register: `width` bits starting at bit `shift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// Position of the field's least significant bit.
    pub shift: u32,
    /// Number of bits, 1..=32.
    pub width: u32,
}

impl Field {
    /// The field of `width` bits at `shift`. Evaluated in constants, so a field that does
    /// not fit in 32 bits fails to compile.
    pub const fn new(shift: u32, width: u32) -> Field {
        assert!(
            width >= 1 && width <= 32 && shift + width <= 32,
            "field outside a 32-bit register"
        );
        Field { shift, width }
    }

    /// The one-bit field at `shift`.
    pub const fn bit(shift: u32) -> Field {
        Field::new(shift, 1)
    }

    /// The largest value the field holds.
    pub const fn max_value(self) -> u32 {
        u32::MAX >> (32 - self.width)
    }

    /// The field's bits in place in the register.
    pub const fn mask(self) -> u32 {
        self.max_value() << self.shift
    }

    /// The field's value in `register`.
    pub const fn extract(self, register: u32) -> u32 {
        (register >> self.shift) & self.max_value()
    }

    /// Whether any bit of the field is set in `register` (for one-bit fields: the bit).
    pub const fn is_set(self, register: u32) -> bool {
        register & self.mask() != 0
    }

    /// `register` with the field replaced by `value`; bits of `value` above the field's
    /// width are dropped.
    pub const fn insert(self, register: u32, value: u32) -> u32 {
        (register & !self.mask()) | ((value & self.max_value()) << self.shift)
    }

    /// `register` with a one-bit field set to `on` (every bit of a wider field).
    pub const fn with(self, register: u32, on: bool) -> u32 {
        if on {
            register | self.mask()
        } else {
            register & !self.mask()
        }
    }

    /// The register value holding only this field, set to `value`.
    pub const fn value(self, value: u32) -> u32 {
        self.insert(0, value)
    }
}

#[cfg(test)]
mod tests {
    use super::Field;

    #[test]
    fn insert_and_extract() {
        let field = Field::new(4, 3);
        assert_eq!(field.mask(), 0x70);
        assert_eq!(field.max_value(), 7);
        assert_eq!(field.insert(0xffff_ffff, 2), 0xffff_ffaf);
        assert_eq!(field.extract(0x50), 5);
        // A value wider than the field is truncated, never spills into the next field.
        assert_eq!(field.insert(0, 0xf), 0x70);
        assert_eq!(field.value(1), 0x10);
    }

    #[test]
    fn whole_register_and_single_bits() {
        let whole = Field::new(0, 32);
        assert_eq!(whole.mask(), u32::MAX);
        assert_eq!(whole.insert(0, 0x1234_5678), 0x1234_5678);
        let top = Field::bit(31);
        assert!(top.is_set(0x8000_0000));
        assert!(!top.is_set(0x7fff_ffff));
        assert_eq!(top.with(0, true), 0x8000_0000);
        assert_eq!(top.with(u32::MAX, false), 0x7fff_ffff);
    }
}
