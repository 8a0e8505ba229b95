//! The instruction names this crate recognises.

/// Declares the enum and its text in one place so the two can never drift apart.
macro_rules! mnemonics {
    ($($(#[$attribute:meta])* $variant:ident => $text:literal,)*) => {
        /// Name of a decoded instruction, spelled as in the RISC-V specifications (and as GNU
        /// objdump prints it with `-M no-aliases`).
        ///
        /// Variants are grouped by extension; RV64-only and RV32-only encodings are only produced
        /// for the matching [`Xlen`](crate::Xlen).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Mnemonic {
            $($(#[$attribute])* $variant,)*
        }

        impl Mnemonic {
            /// Every mnemonic, in declaration order.
            pub const ALL: &'static [Mnemonic] = &[$(Mnemonic::$variant,)*];

            /// The assembler spelling, e.g. `"c.addi16sp"` or `"fcvt.w.s"`.
            #[inline]
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Mnemonic::$variant => $text,)*
                }
            }
        }
    };
}

mnemonics! {
    /// An encoding this crate does not recognise (reserved, custom, or an extension it does
    /// not model). Such instructions are treated as sequential.
    Unknown => "unknown",
    /// The all-zero 16-bit halfword, which the ISA defines to be illegal forever.
    Illegal => "illegal",

    // RV32I / RV64I
    Lui => "lui",
    Auipc => "auipc",
    Jal => "jal",
    Jalr => "jalr",
    Beq => "beq",
    Bne => "bne",
    Blt => "blt",
    Bge => "bge",
    Bltu => "bltu",
    Bgeu => "bgeu",
    Lb => "lb",
    Lh => "lh",
    Lw => "lw",
    Ld => "ld",
    Lbu => "lbu",
    Lhu => "lhu",
    Lwu => "lwu",
    Sb => "sb",
    Sh => "sh",
    Sw => "sw",
    Sd => "sd",
    Addi => "addi",
    Slti => "slti",
    Sltiu => "sltiu",
    Xori => "xori",
    Ori => "ori",
    Andi => "andi",
    Slli => "slli",
    Srli => "srli",
    Srai => "srai",
    Add => "add",
    Sub => "sub",
    Sll => "sll",
    Slt => "slt",
    Sltu => "sltu",
    Xor => "xor",
    Srl => "srl",
    Sra => "sra",
    Or => "or",
    And => "and",
    Addiw => "addiw",
    Slliw => "slliw",
    Srliw => "srliw",
    Sraiw => "sraiw",
    Addw => "addw",
    Subw => "subw",
    Sllw => "sllw",
    Srlw => "srlw",
    Sraw => "sraw",
    Fence => "fence",
    FenceTso => "fence.tso",
    Ecall => "ecall",
    Ebreak => "ebreak",

    // Zifencei
    FenceI => "fence.i",

    // Zicsr
    Csrrw => "csrrw",
    Csrrs => "csrrs",
    Csrrc => "csrrc",
    Csrrwi => "csrrwi",
    Csrrsi => "csrrsi",
    Csrrci => "csrrci",

    // M
    Mul => "mul",
    Mulh => "mulh",
    Mulhsu => "mulhsu",
    Mulhu => "mulhu",
    Div => "div",
    Divu => "divu",
    Rem => "rem",
    Remu => "remu",
    Mulw => "mulw",
    Divw => "divw",
    Divuw => "divuw",
    Remw => "remw",
    Remuw => "remuw",

    // A
    LrW => "lr.w",
    ScW => "sc.w",
    AmoswapW => "amoswap.w",
    AmoaddW => "amoadd.w",
    AmoxorW => "amoxor.w",
    AmoandW => "amoand.w",
    AmoorW => "amoor.w",
    AmominW => "amomin.w",
    AmomaxW => "amomax.w",
    AmominuW => "amominu.w",
    AmomaxuW => "amomaxu.w",
    LrD => "lr.d",
    ScD => "sc.d",
    AmoswapD => "amoswap.d",
    AmoaddD => "amoadd.d",
    AmoxorD => "amoxor.d",
    AmoandD => "amoand.d",
    AmoorD => "amoor.d",
    AmominD => "amomin.d",
    AmomaxD => "amomax.d",
    AmominuD => "amominu.d",
    AmomaxuD => "amomaxu.d",

    // F
    Flw => "flw",
    Fsw => "fsw",
    FmaddS => "fmadd.s",
    FmsubS => "fmsub.s",
    FnmsubS => "fnmsub.s",
    FnmaddS => "fnmadd.s",
    FaddS => "fadd.s",
    FsubS => "fsub.s",
    FmulS => "fmul.s",
    FdivS => "fdiv.s",
    FsqrtS => "fsqrt.s",
    FsgnjS => "fsgnj.s",
    FsgnjnS => "fsgnjn.s",
    FsgnjxS => "fsgnjx.s",
    FminS => "fmin.s",
    FmaxS => "fmax.s",
    FcvtWS => "fcvt.w.s",
    FcvtWuS => "fcvt.wu.s",
    FmvXW => "fmv.x.w",
    FeqS => "feq.s",
    FltS => "flt.s",
    FleS => "fle.s",
    FclassS => "fclass.s",
    FcvtSW => "fcvt.s.w",
    FcvtSWu => "fcvt.s.wu",
    FmvWX => "fmv.w.x",
    FcvtLS => "fcvt.l.s",
    FcvtLuS => "fcvt.lu.s",
    FcvtSL => "fcvt.s.l",
    FcvtSLu => "fcvt.s.lu",

    // D
    Fld => "fld",
    Fsd => "fsd",
    FmaddD => "fmadd.d",
    FmsubD => "fmsub.d",
    FnmsubD => "fnmsub.d",
    FnmaddD => "fnmadd.d",
    FaddD => "fadd.d",
    FsubD => "fsub.d",
    FmulD => "fmul.d",
    FdivD => "fdiv.d",
    FsqrtD => "fsqrt.d",
    FsgnjD => "fsgnj.d",
    FsgnjnD => "fsgnjn.d",
    FsgnjxD => "fsgnjx.d",
    FminD => "fmin.d",
    FmaxD => "fmax.d",
    FcvtSD => "fcvt.s.d",
    FcvtDS => "fcvt.d.s",
    FeqD => "feq.d",
    FltD => "flt.d",
    FleD => "fle.d",
    FclassD => "fclass.d",
    FcvtWD => "fcvt.w.d",
    FcvtWuD => "fcvt.wu.d",
    FcvtDW => "fcvt.d.w",
    FcvtDWu => "fcvt.d.wu",
    FcvtLD => "fcvt.l.d",
    FcvtLuD => "fcvt.lu.d",
    FmvXD => "fmv.x.d",
    FcvtDL => "fcvt.d.l",
    FcvtDLu => "fcvt.d.lu",
    FmvDX => "fmv.d.x",

    // C (Zca, Zcf, Zcd)
    CAddi4spn => "c.addi4spn",
    CFld => "c.fld",
    CLw => "c.lw",
    /// RV32 only (Zcf); the same encoding is `c.ld` on RV64.
    CFlw => "c.flw",
    /// RV64 only; the same encoding is `c.flw` on RV32.
    CLd => "c.ld",
    CFsd => "c.fsd",
    CSw => "c.sw",
    /// RV32 only (Zcf); the same encoding is `c.sd` on RV64.
    CFsw => "c.fsw",
    /// RV64 only; the same encoding is `c.fsw` on RV32.
    CSd => "c.sd",
    CNop => "c.nop",
    CAddi => "c.addi",
    /// RV32 only; the same encoding is `c.addiw` on RV64.
    CJal => "c.jal",
    /// RV64 only; the same encoding is `c.jal` on RV32.
    CAddiw => "c.addiw",
    CLi => "c.li",
    CAddi16sp => "c.addi16sp",
    CLui => "c.lui",
    CSrli => "c.srli",
    CSrai => "c.srai",
    CAndi => "c.andi",
    CSub => "c.sub",
    CXor => "c.xor",
    COr => "c.or",
    CAnd => "c.and",
    CSubw => "c.subw",
    CAddw => "c.addw",
    CJ => "c.j",
    CBeqz => "c.beqz",
    CBnez => "c.bnez",
    CSlli => "c.slli",
    CFldsp => "c.fldsp",
    CLwsp => "c.lwsp",
    /// RV32 only (Zcf); the same encoding is `c.ldsp` on RV64.
    CFlwsp => "c.flwsp",
    /// RV64 only; the same encoding is `c.flwsp` on RV32.
    CLdsp => "c.ldsp",
    CJr => "c.jr",
    CMv => "c.mv",
    CEbreak => "c.ebreak",
    CJalr => "c.jalr",
    CAdd => "c.add",
    CFsdsp => "c.fsdsp",
    CSwsp => "c.swsp",
    /// RV32 only (Zcf); the same encoding is `c.sdsp` on RV64.
    CFswsp => "c.fswsp",
    /// RV64 only; the same encoding is `c.fswsp` on RV32.
    CSdsp => "c.sdsp",

    // Zcmp
    CmPush => "cm.push",
    CmPop => "cm.pop",
    CmPopret => "cm.popret",
    CmPopretz => "cm.popretz",
    CmMva01s => "cm.mva01s",
    CmMvsa01 => "cm.mvsa01",

    // Zcmt
    CmJt => "cm.jt",
    CmJalt => "cm.jalt",

    // Privileged architecture (machine, supervisor, debug, Smrnmi, Svinval, hypervisor)
    Mret => "mret",
    Sret => "sret",
    /// User-level trap return of the withdrawn N extension, still printed by GNU objdump.
    Uret => "uret",
    Mnret => "mnret",
    Dret => "dret",
    Wfi => "wfi",
    SfenceVma => "sfence.vma",
    SinvalVma => "sinval.vma",
    SfenceWInval => "sfence.w.inval",
    SfenceInvalIr => "sfence.inval.ir",
    HfenceVvma => "hfence.vvma",
    HfenceGvma => "hfence.gvma",
    HinvalVvma => "hinval.vvma",
    HinvalGvma => "hinval.gvma",
    HlvB => "hlv.b",
    HlvBu => "hlv.bu",
    HlvH => "hlv.h",
    HlvHu => "hlv.hu",
    HlvxHu => "hlvx.hu",
    HlvW => "hlv.w",
    HlvxWu => "hlvx.wu",
    HlvWu => "hlv.wu",
    HlvD => "hlv.d",
    HsvB => "hsv.b",
    HsvH => "hsv.h",
    HsvW => "hsv.w",
    HsvD => "hsv.d",
}

impl core::fmt::Display for Mnemonic {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str(self.as_str())
    }
}
