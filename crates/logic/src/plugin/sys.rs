//! All FFI of the plug-in logic: dlopen/dlsym/dlclose and the calls into
//! the library through the C ABI of include/turnout_logic.h.

use std::ffi::{c_char, c_void, CStr, CString};

/// `TURNOUT_LOGIC_ABI_VERSION` of include/turnout_logic.h.
pub const ABI_VERSION: u32 = 1;

/// `struct tl_pkt`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TlPkt {
    pub data: *mut u8,
    pub len: u32,
    pub port: u16,
    pub queue: u16,
}

impl TlPkt {
    pub const EMPTY: TlPkt = TlPkt {
        data: std::ptr::null_mut(),
        len: 0,
        port: 0,
        queue: 0,
    };
}

/// `struct tl_verdict`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlVerdict {
    pub kind: u32,
    pub arg: u32,
}

pub const TL_PORT: u32 = 0;
pub const TL_FLOOD: u32 = 1;
pub const TL_DROP: u32 = 2;

type AbiVersionFn = unsafe extern "C" fn() -> u32;
type InitFn = unsafe extern "C" fn(*const c_char, *mut c_char, u32) -> *mut c_void;
type ClassifyFn = unsafe extern "C" fn(*mut c_void, u16, *const TlPkt, u32, *mut TlVerdict);
type DestroyFn = unsafe extern "C" fn(*mut c_void);

/// A C string literal (MSRV 1.75 predates `c"..."`).
fn cstr(b: &'static [u8]) -> &'static CStr {
    CStr::from_bytes_with_nul(b).expect("literal ends with one nul")
}

/// A dlopen handle, closed on drop.
struct Library {
    handle: *mut c_void,
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a valid NUL-terminated string owned by
    // libc, valid until the next dl* call on this thread; we copy it at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated (see above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Library {
    fn open(path: &str) -> Result<Library, String> {
        let c = CString::new(path).map_err(|_| "path contains a nul byte".to_string())?;
        // SAFETY: c is a valid C string. Loading runs the library's
        // constructors: loading a library is trusting it, by design.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(dlerror());
        }
        Ok(Library { handle })
    }

    fn symbol(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: handle is a live dlopen handle; name is a C string.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: handle came from dlopen and is closed exactly once; no
        // function pointer into it outlives the Plugin that owns it.
        unsafe { libc::dlclose(self.handle) };
    }
}

/// A loaded, initialised plug-in.
pub struct Plugin {
    state: *mut c_void,
    classify: ClassifyFn,
    destroy: DestroyFn,
    // Declared last: dropped after Plugin::drop has called destroy.
    _lib: Library,
}

// SAFETY: the ABI (include/turnout_logic.h) requires classify to be callable
// concurrently from several threads with the same state, and init/destroy
// are called once each, from whichever thread builds or drops the logic.
unsafe impl Send for Plugin {}
// SAFETY: see Send.
unsafe impl Sync for Plugin {}

impl Plugin {
    /// Loads `path`, checks the ABI and calls init with `config`.
    pub fn load(path: &str, config: &CStr) -> Result<Plugin, String> {
        let lib = Library::open(path).map_err(|e| format!("cannot load: {e}"))?;
        let sym = |name: &CStr| {
            lib.symbol(name)
                .ok_or_else(|| format!("missing symbol {}", name.to_string_lossy()))
        };
        let version = sym(cstr(b"turnout_logic_abi_version\0"))?;
        let init = sym(cstr(b"turnout_logic_init\0"))?;
        let classify = sym(cstr(b"turnout_logic_classify\0"))?;
        let destroy = sym(cstr(b"turnout_logic_destroy\0"))?;
        // SAFETY: the symbol is the ABI's `uint32_t (void)` function.
        let v = unsafe { std::mem::transmute::<*mut c_void, AbiVersionFn>(version)() };
        if v != ABI_VERSION {
            return Err(format!(
                "abi version {v}, this turnoutd supports {ABI_VERSION}"
            ));
        }
        // SAFETY: the ABI version matches, so the symbols have the types of
        // include/turnout_logic.h version ABI_VERSION.
        let (init, classify, destroy) = unsafe {
            (
                std::mem::transmute::<*mut c_void, InitFn>(init),
                std::mem::transmute::<*mut c_void, ClassifyFn>(classify),
                std::mem::transmute::<*mut c_void, DestroyFn>(destroy),
            )
        };
        let mut err = [0 as c_char; 256];
        // SAFETY: config is a C string; err is writable for its length.
        let state = unsafe { init(config.as_ptr(), err.as_mut_ptr(), err.len() as u32) };
        if state.is_null() {
            err[err.len() - 1] = 0;
            // SAFETY: err is NUL-terminated (forced above).
            let msg = unsafe { CStr::from_ptr(err.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            return Err(format!(
                "init refused the config: {}",
                if msg.is_empty() {
                    "no reason given"
                } else {
                    &msg
                }
            ));
        }
        Ok(Plugin {
            state,
            classify,
            destroy,
            _lib: lib,
        })
    }

    /// Classifies `pkts` into `out` (same length).
    #[inline]
    pub fn classify(&self, ingress: u16, pkts: &[TlPkt], out: &mut [TlVerdict]) {
        debug_assert_eq!(pkts.len(), out.len());
        let n = pkts.len().min(out.len());
        // SAFETY: state came from init and is not destroyed while self lives;
        // pkts[..n] point at frames valid for the duration of the call (the
        // caller's &mut Pkts borrow, one frame per view); out[..n] is writable.
        unsafe {
            (self.classify)(
                self.state,
                ingress,
                pkts.as_ptr(),
                n as u32,
                out.as_mut_ptr(),
            )
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        // SAFETY: state came from init; no classify runs (we hold the only
        // reference), and destroy is called exactly once.
        unsafe { (self.destroy)(self.state) }
    }
}
