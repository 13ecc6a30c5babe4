//! Safe Rust bindings to kiln through its C API (docs/c_api.md): the one runtime of the kiln wheel's
//! libkiln.so.0, shared with Python and C++ in the same process.
//!
//! ```no_run
//! let program = kiln::Program::load("model.kiln")?;
//! let mut method = program.load_method("forward")?;
//! let x = vec![0.0f32; 4 * 32];
//! let outputs = method.run(&[&kiln::Tensor::view(&x, &[4, 32])?])?;
//! println!("{:?}", outputs[0].sizes()?);
//! # Ok::<(), kiln::Error>(())
//! ```
//!
//! Every handle frees itself when dropped. A `Program` may be shared by threads (`Send + Sync`);
//! a `Method` moves between threads (`Send`) and its calls take `&mut self`.

pub mod ffi;
#[cfg(feature = "llm")]
pub mod llm;

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::ptr;
use std::sync::OnceLock;

/// A failed call: the kiln::Error kind (its code and stable name) and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub kind: String,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The element types (the values of KILN_DTYPE_* and of the program format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    Float32 = 0,
    Float64 = 1,
    Int64 = 2,
    Int32 = 3,
    Bool = 4,
    Float16 = 5,
    BFloat16 = 6,
    UInt8 = 7,
    Int8 = 8,
}

impl DType {
    pub fn from_code(code: i32) -> Option<DType> {
        use DType::*;
        [Float32, Float64, Int64, Int32, Bool, Float16, BFloat16, UInt8, Int8].get(usize::try_from(code).ok()?).copied()
    }
    pub fn size(self) -> usize {
        match self {
            DType::Float64 | DType::Int64 => 8,
            DType::Float32 | DType::Int32 => 4,
            DType::Float16 | DType::BFloat16 => 2,
            DType::Bool | DType::UInt8 | DType::Int8 => 1,
        }
    }
}

/// Rust element types that map to a kiln dtype.
pub trait Element: Copy {
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::Float32;
}
impl Element for f64 {
    const DTYPE: DType = DType::Float64;
}
impl Element for i64 {
    const DTYPE: DType = DType::Int64;
}
impl Element for i32 {
    const DTYPE: DType = DType::Int32;
}
impl Element for u8 {
    const DTYPE: DType = DType::UInt8;
}
impl Element for i8 {
    const DTYPE: DType = DType::Int8;
}

fn base() -> &'static ffi::kiln_api_base {
    // SAFETY: the entry point returns a pointer to a static struct of the library, never null.
    unsafe { &*ffi::kiln_get_api_base() }
}

/// The function table of `version`, or the library's refusal (a library older than `version`).
pub fn api_version(version: u32) -> Result<&'static ffi::kiln_api> {
    let b = base();
    let mut status = ptr::null_mut();
    // SAFETY: get_api takes any version and writes a status we own on refusal.
    let table = unsafe { (b.get_api)(version, &mut status) };
    if table.is_null() {
        // SAFETY: the status came from this library and is freed once, here.
        let message = unsafe { CStr::from_ptr((b.status_message)(status)).to_string_lossy().into_owned() };
        let code = unsafe { (b.status_code)(status) };
        unsafe { (b.status_free)(status) };
        return Err(Error { code, kind: "abi_mismatch".into(), message });
    }
    // SAFETY: a non-null table is static in the library.
    Ok(unsafe { &*table })
}

/// The table this crate was written for (API version 1), looked up once.
fn api() -> Result<&'static ffi::kiln_api> {
    static API: OnceLock<std::result::Result<&'static ffi::kiln_api, Error>> = OnceLock::new();
    API.get_or_init(|| api_version(ffi::KILN_C_API_VERSION)).clone()
}

/// Turns a status into a Result, freeing it.
pub(crate) fn check(status: *mut ffi::kiln_status) -> Result<()> {
    if status.is_null() {
        return Ok(());
    }
    let a = api()?;
    // SAFETY: a status returned by the table is ours to read and free.
    unsafe {
        let code = (a.status_code)(status);
        let kind = CStr::from_ptr((a.code_name)(code)).to_string_lossy().into_owned();
        let message = CStr::from_ptr((a.status_message)(status)).to_string_lossy().into_owned();
        (a.status_free)(status);
        Err(Error { code, kind, message })
    }
}

pub(crate) fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error {
        code: 1,
        kind: "invalid_argument".into(),
        message: format!("{s:?} holds a NUL"),
    })
}

pub(crate) fn owned_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the C API returns NUL-terminated strings valid at least until the next call on the handle.
    unsafe { CStr::from_ptr(p).to_string_lossy().into_owned() }
}

/// What libkiln.so.0 says about itself.
#[derive(Clone, Debug)]
pub struct BuildInfo {
    pub version: String,
    pub api_version: u32,
    pub runtime_library: String,
    pub detected_isa: String,
}

pub fn build_info() -> Result<BuildInfo> {
    let a = api()?;
    // SAFETY: zeroed pointers and integers are a valid kiln_build_info; struct_size says how much we have.
    let mut info: ffi::kiln_build_info = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<ffi::kiln_build_info>();
    check(unsafe { (a.build_info)(&mut info) })?;
    Ok(BuildInfo {
        version: owned_str(info.version),
        api_version: info.api_version,
        runtime_library: owned_str(info.runtime_library),
        detected_isa: owned_str(info.detected_isa),
    })
}

/// Sizes the runtime's one thread pool (n < 1: one thread per core).
pub fn set_num_threads(n: i32) -> Result<()> {
    check(unsafe { (api()?.set_num_threads)(n) })
}

/// Loads a plugin library into the process-wide registries; returns (kernels, backends) it registered.
pub fn load_library(path: &str) -> Result<(usize, usize)> {
    let path = c_string(path)?;
    let (mut kernels, mut backends) = (0usize, 0usize);
    check(unsafe { (api()?.load_library)(path.as_ptr(), &mut kernels, &mut backends) })?;
    Ok((kernels, backends))
}

/// How many kernels the process-wide registry holds (the same registry Python and C++ see).
pub fn registered_kernel_count() -> Result<usize> {
    let mut n = 0usize;
    check(unsafe { (api()?.registered_kernel_count)(&mut n) })?;
    Ok(n)
}

/// How a program is loaded; `None` fields keep the runtime's defaults (and its environment).
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// "optimized" or "portable".
    pub kernels: Option<String>,
    /// An ISA level name ("avx2", ...).
    pub isa: Option<String>,
    pub max_memory_bytes: Option<u64>,
    /// false: read the whole file instead of mapping it.
    pub map_file: Option<bool>,
}

struct OptionsHandle(*mut ffi::kiln_load_options);

impl Drop for OptionsHandle {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            unsafe { (a.load_options_free)(self.0) };
        }
    }
}

impl LoadOptions {
    fn handle(&self) -> Result<OptionsHandle> {
        let a = api()?;
        let mut h = ptr::null_mut();
        check(unsafe { (a.load_options_create)(&mut h) })?;
        let h = OptionsHandle(h);
        if let Some(k) = &self.kernels {
            let k = c_string(k)?;
            check(unsafe { (a.load_options_set_kernels)(h.0, k.as_ptr()) })?;
        }
        if let Some(i) = &self.isa {
            let i = c_string(i)?;
            check(unsafe { (a.load_options_set_isa)(h.0, i.as_ptr()) })?;
        }
        if let Some(m) = self.max_memory_bytes {
            check(unsafe { (a.load_options_set_max_memory)(h.0, m) })?;
        }
        if let Some(m) = self.map_file {
            check(unsafe { (a.load_options_set_map_file)(h.0, i32::from(m)) })?;
        }
        Ok(h)
    }
}

/// A loaded, verified program.
pub struct Program {
    raw: *mut ffi::kiln_program,
}

// SAFETY: a program is immutable once loaded; the C API lets any number of threads use one.
unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Drop for Program {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            unsafe { (a.program_free)(self.raw) };
        }
    }
}

impl Program {
    /// Maps and verifies a .kiln file with the default options.
    pub fn load(path: &str) -> Result<Program> {
        Program::load_with(path, &LoadOptions::default())
    }

    pub fn load_with(path: &str, options: &LoadOptions) -> Result<Program> {
        let a = api()?;
        let path = c_string(path)?;
        let options = options.handle()?;
        let mut raw = ptr::null_mut();
        check(unsafe { (a.program_load)(path.as_ptr(), options.0, &mut raw) })?;
        Ok(Program { raw })
    }

    /// Loads a copy of `bytes` (they may be dropped as soon as this returns).
    pub fn from_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Program> {
        let a = api()?;
        let options = options.handle()?;
        let mut raw = ptr::null_mut();
        check(unsafe { (a.program_load_from_copy)(bytes.as_ptr().cast(), bytes.len(), options.0, &mut raw) })?;
        Ok(Program { raw })
    }

    pub fn method_names(&self) -> Result<Vec<String>> {
        let a = api()?;
        let mut n = 0usize;
        check(unsafe { (a.program_method_count)(self.raw, &mut n) })?;
        (0..n)
            .map(|i| {
                let mut name = ptr::null();
                check(unsafe { (a.program_method_name)(self.raw, i, &mut name) })?;
                Ok(owned_str(name))
            })
            .collect()
    }

    /// Resolves kernels and allocates the method's planned memory once; it outlives the program.
    pub fn load_method(&self, name: &str) -> Result<Method> {
        let a = api()?;
        let name = c_string(name)?;
        let mut raw = ptr::null_mut();
        check(unsafe { (a.program_load_method)(self.raw, name.as_ptr(), &mut raw) })?;
        Ok(Method { raw })
    }
}

/// Which list of a method's tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecKind {
    Input = 0,
    Output = 1,
    State = 2,
}

/// What a method expects or gives for one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: Option<DType>,
    pub max_sizes: Vec<i64>,
    pub min_sizes: Vec<i64>,
    pub dynamic: Vec<bool>,
}

/// One execution context of a method: its planned memory and state.
pub struct Method {
    raw: *mut ffi::kiln_method,
}

// SAFETY: the C API lets a method be used from any thread (calls take turns); &mut self keeps one caller.
unsafe impl Send for Method {}

impl Drop for Method {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            unsafe { (a.method_free)(self.raw) };
        }
    }
}

impl Method {
    pub fn specs(&self, kind: SpecKind) -> Result<Vec<TensorSpec>> {
        let a = api()?;
        let mut n = 0usize;
        check(unsafe { (a.method_tensor_count)(self.raw, kind as i32, &mut n) })?;
        (0..n)
            .map(|i| {
                // SAFETY: all-zero is a valid kiln_tensor_spec (null pointers, zero sizes).
                let mut s: ffi::kiln_tensor_spec = unsafe { std::mem::zeroed() };
                s.struct_size = std::mem::size_of::<ffi::kiln_tensor_spec>();
                check(unsafe { (a.method_tensor_spec)(self.raw, kind as i32, i, &mut s) })?;
                let ndim = usize::try_from(s.ndim).unwrap_or(0);
                // SAFETY: the method owns ndim sizes behind each pointer while it lives.
                let (max, min) = unsafe {
                    (
                        std::slice::from_raw_parts(s.max_sizes, ndim).to_vec(),
                        std::slice::from_raw_parts(s.min_sizes, ndim).to_vec(),
                    )
                };
                Ok(TensorSpec {
                    name: owned_str(s.name),
                    dtype: DType::from_code(s.dtype),
                    max_sizes: max,
                    min_sizes: min,
                    dynamic: (0..ndim).map(|d| s.dynamic_mask & (1 << d) != 0).collect(),
                })
            })
            .collect()
    }

    /// Runs the method on `inputs` (read during the call only); the outputs are kiln-allocated copies.
    pub fn run(&mut self, inputs: &[&Tensor<'_>]) -> Result<Vec<Tensor<'static>>> {
        let a = api()?;
        let mut n = 0usize;
        check(unsafe { (a.method_tensor_count)(self.raw, SpecKind::Output as i32, &mut n) })?;
        let raw_inputs: Vec<*const ffi::kiln_tensor> = inputs.iter().map(|t| t.raw as *const _).collect();
        let mut slots: Vec<*mut ffi::kiln_tensor> = vec![ptr::null_mut(); n];
        check(unsafe { (a.method_run)(self.raw, raw_inputs.as_ptr(), raw_inputs.len(), slots.as_mut_ptr(), n) })?;
        Ok(slots.into_iter().map(|raw| Tensor { raw, _borrow: PhantomData }).collect())
    }

    /// Restores the state tensors to their values in the program file.
    pub fn reset_state(&mut self) -> Result<()> {
        check(unsafe { (api()?.method_reset_state)(self.raw) })
    }
}

/// A tensor handle: kiln-allocated (`Tensor<'static>`) or a view of a caller's slice (`Tensor<'a>`).
pub struct Tensor<'a> {
    raw: *mut ffi::kiln_tensor,
    _borrow: PhantomData<&'a [u8]>,
}

// SAFETY: a tensor is used by one thread at a time, which ownership of the Rust value ensures.
unsafe impl Send for Tensor<'_> {}

impl Drop for Tensor<'_> {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            unsafe { (a.tensor_free)(self.raw) };
        }
    }
}

impl<'a> Tensor<'a> {
    /// A view of `data` with `sizes` (checked against its length); kiln only reads it.
    pub fn view<T: Element>(data: &'a [T], sizes: &[i64]) -> Result<Tensor<'a>> {
        let a = api()?;
        let mut raw = ptr::null_mut();
        check(unsafe {
            (a.tensor_create_view)(
                data.as_ptr() as *mut c_void,
                std::mem::size_of_val(data),
                T::DTYPE as i32,
                sizes.as_ptr(),
                sizes.len(),
                &mut raw,
            )
        })?;
        Ok(Tensor { raw, _borrow: PhantomData })
    }
}

impl Tensor<'static> {
    /// A kiln-allocated tensor holding a copy of `bytes` (which must be exactly what the sizes need).
    pub fn from_bytes(dtype: DType, sizes: &[i64], bytes: &[u8]) -> Result<Tensor<'static>> {
        let a = api()?;
        let mut raw = ptr::null_mut();
        check(unsafe { (a.tensor_create)(dtype as i32, sizes.as_ptr(), sizes.len(), &mut raw) })?;
        let t = Tensor { raw, _borrow: PhantomData };
        let (data, nbytes) = t.raw_data()?;
        if nbytes != bytes.len() {
            return Err(Error {
                code: 1,
                kind: "invalid_argument".into(),
                message: format!("the sizes {sizes:?} need {nbytes} bytes, {} were given", bytes.len()),
            });
        }
        // SAFETY: the tensor owns nbytes writable bytes at data.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), data.cast::<u8>(), nbytes) };
        Ok(t)
    }
}

impl fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype().ok().flatten())
            .field("sizes", &self.sizes().ok())
            .finish()
    }
}

impl Tensor<'_> {
    fn raw_data(&self) -> Result<(*mut c_void, usize)> {
        let (mut data, mut nbytes) = (ptr::null_mut(), 0usize);
        check(unsafe { (api()?.tensor_data)(self.raw, &mut data, &mut nbytes) })?;
        Ok((data, nbytes))
    }

    pub fn dtype(&self) -> Result<Option<DType>> {
        let mut d = 0;
        check(unsafe { (api()?.tensor_dtype)(self.raw, &mut d) })?;
        Ok(DType::from_code(d))
    }

    pub fn sizes(&self) -> Result<Vec<i64>> {
        let mut sizes = [0i64; ffi::KILN_MAX_DIMS];
        let mut ndim = 0usize;
        check(unsafe { (api()?.tensor_sizes)(self.raw, sizes.as_mut_ptr(), sizes.len(), &mut ndim) })?;
        Ok(sizes[..ndim.min(sizes.len())].to_vec())
    }

    /// The tensor's bytes (row-major, native endianness).
    pub fn bytes(&self) -> Result<&[u8]> {
        let (data, nbytes) = self.raw_data()?;
        if nbytes == 0 {
            return Ok(&[]);
        }
        // SAFETY: the tensor's memory holds nbytes bytes while it lives and is not written through &self.
        Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), nbytes) })
    }
}
