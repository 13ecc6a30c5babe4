//! The C API of kiln/c_api.h, declared by hand (no bindgen): the one exported entry point and the
//! version 1 table. The field order is the header's and never changes (docs/c_api.md); the
//! Python test compares these declarations with the installed header.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type kiln_code = i32;
pub type kiln_dtype = i32;
pub type kiln_spec_kind = i32;

pub const KILN_C_API_VERSION: u32 = 1;
pub const KILN_MAX_DIMS: usize = 8;
pub const KILN_SPEC_INPUT: kiln_spec_kind = 0;
pub const KILN_SPEC_OUTPUT: kiln_spec_kind = 1;
pub const KILN_SPEC_STATE: kiln_spec_kind = 2;

#[repr(C)]
pub struct kiln_status {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct kiln_load_options {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct kiln_program {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct kiln_method {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct kiln_tensor {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct kiln_tensor_spec {
    pub struct_size: usize,
    pub name: *const c_char,
    pub dtype: kiln_dtype,
    pub ndim: i32,
    pub max_sizes: *const i64,
    pub min_sizes: *const i64,
    pub dynamic_mask: u32,
}

#[repr(C)]
pub struct kiln_build_info {
    pub struct_size: usize,
    pub version: *const c_char,
    pub api_version: u32,
    pub abi_version: u32,
    pub runtime_library: *const c_char,
    pub detected_isa: *const c_char,
    pub compiler: *const c_char,
}

type Status = *mut kiln_status;

#[repr(C)]
pub struct kiln_api {
    pub version: u32,
    pub struct_size: u32,

    pub status_code: unsafe extern "C" fn(*const kiln_status) -> kiln_code,
    pub status_message: unsafe extern "C" fn(*const kiln_status) -> *const c_char,
    pub code_name: unsafe extern "C" fn(kiln_code) -> *const c_char,
    pub status_free: unsafe extern "C" fn(*mut kiln_status),

    pub build_info: unsafe extern "C" fn(*mut kiln_build_info) -> Status,
    pub set_num_threads: unsafe extern "C" fn(i32) -> Status,
    pub num_threads: unsafe extern "C" fn(*mut i32) -> Status,
    pub load_library: unsafe extern "C" fn(*const c_char, *mut usize, *mut usize) -> Status,
    pub registered_kernel_count: unsafe extern "C" fn(*mut usize) -> Status,
    pub registered_backend_count: unsafe extern "C" fn(*mut usize) -> Status,

    pub load_options_create: unsafe extern "C" fn(*mut *mut kiln_load_options) -> Status,
    pub load_options_free: unsafe extern "C" fn(*mut kiln_load_options),
    pub load_options_set_kernels: unsafe extern "C" fn(*mut kiln_load_options, *const c_char) -> Status,
    pub load_options_set_isa: unsafe extern "C" fn(*mut kiln_load_options, *const c_char) -> Status,
    pub load_options_set_max_memory: unsafe extern "C" fn(*mut kiln_load_options, u64) -> Status,
    pub load_options_set_map_file: unsafe extern "C" fn(*mut kiln_load_options, i32) -> Status,

    pub program_load: unsafe extern "C" fn(*const c_char, *const kiln_load_options, *mut *mut kiln_program) -> Status,
    pub program_load_from_buffer:
        unsafe extern "C" fn(*const c_void, usize, *const kiln_load_options, *mut *mut kiln_program) -> Status,
    pub program_load_from_copy:
        unsafe extern "C" fn(*const c_void, usize, *const kiln_load_options, *mut *mut kiln_program) -> Status,
    pub program_free: unsafe extern "C" fn(*mut kiln_program),
    pub program_method_count: unsafe extern "C" fn(*const kiln_program, *mut usize) -> Status,
    pub program_method_name: unsafe extern "C" fn(*const kiln_program, usize, *mut *const c_char) -> Status,
    pub program_load_method: unsafe extern "C" fn(*const kiln_program, *const c_char, *mut *mut kiln_method) -> Status,

    pub method_free: unsafe extern "C" fn(*mut kiln_method),
    pub method_name: unsafe extern "C" fn(*const kiln_method, *mut *const c_char) -> Status,
    pub method_tensor_count: unsafe extern "C" fn(*const kiln_method, kiln_spec_kind, *mut usize) -> Status,
    pub method_tensor_spec:
        unsafe extern "C" fn(*const kiln_method, kiln_spec_kind, usize, *mut kiln_tensor_spec) -> Status,
    pub method_run: unsafe extern "C" fn(
        *mut kiln_method,
        *const *const kiln_tensor,
        usize,
        *mut *mut kiln_tensor,
        usize,
    ) -> Status,
    pub method_reset_state: unsafe extern "C" fn(*mut kiln_method) -> Status,

    pub tensor_create_view:
        unsafe extern "C" fn(*mut c_void, usize, kiln_dtype, *const i64, usize, *mut *mut kiln_tensor) -> Status,
    pub tensor_create: unsafe extern "C" fn(kiln_dtype, *const i64, usize, *mut *mut kiln_tensor) -> Status,
    pub tensor_free: unsafe extern "C" fn(*mut kiln_tensor),
    pub tensor_dtype: unsafe extern "C" fn(*const kiln_tensor, *mut kiln_dtype) -> Status,
    pub tensor_sizes: unsafe extern "C" fn(*const kiln_tensor, *mut i64, usize, *mut usize) -> Status,
    pub tensor_data: unsafe extern "C" fn(*const kiln_tensor, *mut *mut c_void, *mut usize) -> Status,
}

#[repr(C)]
pub struct kiln_api_base {
    pub struct_size: u32,
    pub max_version: u32,
    pub get_api: unsafe extern "C" fn(u32, *mut *mut kiln_status) -> *const kiln_api,
    pub version_string: unsafe extern "C" fn() -> *const c_char,
    pub status_code: unsafe extern "C" fn(*const kiln_status) -> kiln_code,
    pub status_message: unsafe extern "C" fn(*const kiln_status) -> *const c_char,
    pub status_free: unsafe extern "C" fn(*mut kiln_status),
}

extern "C" {
    pub fn kiln_get_api_base() -> *const kiln_api_base;
}
