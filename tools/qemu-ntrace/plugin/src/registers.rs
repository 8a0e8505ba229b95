//! The hart registers the ingress port reports, read through QEMU's plugin register API.
//!
//! The crate's `RegisterDescriptor::read` allocates a byte array and a vector per read;
//! a block callback reads `pc` on every executed block, so the raw API is used here with
//! one reusable buffer per hart.

use std::ffi::CStr;
use std::sync::OnceLock;

use qemu_plugin::sys::{
    qemu_plugin_get_registers, qemu_plugin_read_register, qemu_plugin_reg_descriptor,
    qemu_plugin_register, GArray, GByteArray,
};

// GLib, which QEMU links and the plugin's symbols resolve against when it is loaded.
unsafe extern "C" {
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_byte_array_set_size(array: *mut GByteArray, length: u32) -> *mut GByteArray;
    fn g_byte_array_free(array: *mut GByteArray, free_segment: i32) -> *mut u8;
    fn g_array_free(array: *mut GArray, free_segment: i32) -> *mut i8;
}

/// A register the encoder needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Register {
    ProgramCounter,
    /// The `priv` pseudo-register of QEMU's gdb stub: the privilege level.
    Privilege,
    /// The `time` CSR (the platform timer).
    Time,
    SupervisorCause,
    SupervisorExceptionPc,
    SupervisorTrapVector,
    MachineCause,
    MachineExceptionPc,
    MachineTrapVector,
}

impl Register {
    const ALL: [Register; 9] = [
        Register::ProgramCounter,
        Register::Privilege,
        Register::Time,
        Register::SupervisorCause,
        Register::SupervisorExceptionPc,
        Register::SupervisorTrapVector,
        Register::MachineCause,
        Register::MachineExceptionPc,
        Register::MachineTrapVector,
    ];

    /// The name in QEMU's register list (its gdb feature files).
    fn name(self) -> &'static str {
        match self {
            Register::ProgramCounter => "pc",
            Register::Privilege => "priv",
            Register::Time => "time",
            Register::SupervisorCause => "scause",
            Register::SupervisorExceptionPc => "sepc",
            Register::SupervisorTrapVector => "stvec",
            Register::MachineCause => "mcause",
            Register::MachineExceptionPc => "mepc",
            Register::MachineTrapVector => "mtvec",
        }
    }
}

/// QEMU's handles of [`Register::ALL`], in that order. A handle is a register number,
/// the same for every vCPU of the machine's one CPU model.
struct Handles([usize; Register::ALL.len()]);

static HANDLES: OnceLock<Result<Handles, String>> = OnceLock::new();

/// Looks the registers up. QEMU lists registers only from a vCPU callback.
fn handles() -> Result<&'static Handles, &'static str> {
    HANDLES
        .get_or_init(|| {
            // SAFETY: called from a vCPU callback, as the API requires; QEMU returns a
            // GArray of `qemu_plugin_reg_descriptor` (owned by the caller, freed below;
            // the names it points to live as long as the vCPU).
            let list = unsafe { qemu_plugin_get_registers() };
            if list.is_null() {
                return Err("QEMU lists no registers".to_string());
            }
            let mut found = [usize::MAX; Register::ALL.len()];
            // SAFETY: `list` is the non-null GArray QEMU just returned; its `len`
            // elements of type `qemu_plugin_reg_descriptor` start at `data`.
            let descriptors = unsafe {
                std::slice::from_raw_parts(
                    (*list).data.cast::<qemu_plugin_reg_descriptor>(),
                    (*list).len as usize,
                )
            };
            for descriptor in descriptors {
                // SAFETY: every descriptor's name is a NUL-terminated string of QEMU's.
                let name = unsafe { CStr::from_ptr(descriptor.name) }.to_bytes();
                for (index, register) in Register::ALL.iter().enumerate() {
                    if name == register.name().as_bytes() && found[index] == usize::MAX {
                        found[index] = descriptor.handle as usize;
                    }
                }
            }
            // SAFETY: frees the array QEMU allocated for us (the descriptors' strings are
            // QEMU's own and are not freed with it).
            unsafe { g_array_free(list, 1) };
            match Register::ALL
                .iter()
                .zip(found)
                .find(|(_, handle)| *handle == usize::MAX)
            {
                Some((missing, _)) => Err(format!(
                    "QEMU has no register named {} (is this a riscv64 machine?)",
                    missing.name()
                )),
                None => Ok(Handles(found)),
            }
        })
        .as_ref()
        .map_err(String::as_str)
}

/// Reads registers of the current vCPU into a buffer it keeps.
#[derive(Debug)]
pub struct RegisterReader {
    buffer: *mut GByteArray,
}

// SAFETY: the buffer is a heap GByteArray owned by this reader alone; it is used by one
// thread at a time (the reader lives in a hart's state, behind its mutex).
unsafe impl Send for RegisterReader {}

impl RegisterReader {
    pub fn new() -> Self {
        // SAFETY: allocates an empty byte array; GLib aborts rather than return null.
        let buffer = unsafe { g_byte_array_new() };
        Self { buffer }
    }

    /// The value of `register` (zero-extended little-endian). Only valid in a callback
    /// registered with `QEMU_PLUGIN_CB_R_REGS`.
    pub fn read(&mut self, register: Register) -> Result<u64, &'static str> {
        let handles = handles()?;
        let index = Register::ALL
            .iter()
            .position(|&known| known == register)
            .unwrap_or_default();
        // SAFETY: `buffer` is our live GByteArray; resizing to 0 keeps its allocation.
        unsafe { g_byte_array_set_size(self.buffer, 0) };
        // SAFETY: the handle came from QEMU's register list; `buffer` is a valid
        // GByteArray the value is appended to.
        let read = unsafe {
            qemu_plugin_read_register(handles.0[index] as *mut qemu_plugin_register, self.buffer)
        };
        if read <= 0 {
            return Err("QEMU could not read a register");
        }
        // SAFETY: QEMU appended `len` bytes at `data`.
        let bytes =
            unsafe { std::slice::from_raw_parts((*self.buffer).data, (*self.buffer).len as usize) };
        let mut value = [0u8; 8];
        let length = bytes.len().min(8);
        value[..length].copy_from_slice(&bytes[..length]);
        Ok(u64::from_le_bytes(value))
    }
}

impl Default for RegisterReader {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RegisterReader {
    fn drop(&mut self) {
        // SAFETY: frees the array allocated in `new`, with its data.
        unsafe { g_byte_array_free(self.buffer, 1) };
    }
}
