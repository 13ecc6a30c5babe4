//! The LLM runner (feature `llm`) through kiln/llm/c_api.h: load a .kiln LLM program, generate with
//! a streaming closure, tokenize. Statuses are the core API's, so errors are the same `kiln::Error`.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::ffi::{kiln_load_options, kiln_status};
use crate::{c_string, check, owned_str, Error, Result};

#[repr(C)]
pub struct kiln_llm_runner {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct kiln_llm_generate_options {
    pub struct_size: usize,
    pub max_new_tokens: i32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub seed: i64,
    pub ignore_eos: i32,
}

#[repr(C)]
pub struct kiln_llm_stats {
    pub struct_size: usize,
    pub prompt_tokens: i32,
    pub reused_tokens: i32,
    pub generated_tokens: i32,
    pub load_ms: f64,
    pub time_to_first_token_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub finish_reason: *const c_char,
}

pub type kiln_llm_text_callback = unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> i32;
type Status = *mut kiln_status;

/// The version 1 table of kiln/llm/c_api.h, in its order.
#[repr(C)]
pub struct kiln_llm_api {
    pub version: u32,
    pub struct_size: u32,
    pub generate_options_init: unsafe extern "C" fn(*mut kiln_llm_generate_options) -> Status,
    pub runner_load:
        unsafe extern "C" fn(*const c_char, *const kiln_load_options, i32, *mut *mut kiln_llm_runner) -> Status,
    pub runner_free: unsafe extern "C" fn(*mut kiln_llm_runner),
    pub generate: unsafe extern "C" fn(
        *mut kiln_llm_runner,
        *const c_char,
        *const kiln_llm_generate_options,
        Option<kiln_llm_text_callback>,
        *mut c_void,
        *mut *mut c_char,
    ) -> Status,
    pub cancel: unsafe extern "C" fn(*mut kiln_llm_runner) -> Status,
    pub reset: unsafe extern "C" fn(*mut kiln_llm_runner) -> Status,
    pub encode:
        unsafe extern "C" fn(*const kiln_llm_runner, *const c_char, usize, i32, *mut i32, usize, *mut usize) -> Status,
    pub decode: unsafe extern "C" fn(*const kiln_llm_runner, *const i32, usize, i32, *mut *mut c_char) -> Status,
    pub stats: unsafe extern "C" fn(*const kiln_llm_runner, *mut kiln_llm_stats) -> Status,
    pub string_free: unsafe extern "C" fn(*mut c_char),
}

extern "C" {
    pub fn kiln_llm_get_api(version: u32, status: *mut *mut kiln_status) -> *const kiln_llm_api;
}

fn api() -> Result<&'static kiln_llm_api> {
    let mut status = ptr::null_mut();
    // SAFETY: the entry point takes any version; a refusal comes with a status we own.
    let table = unsafe { kiln_llm_get_api(1, &mut status) };
    if table.is_null() {
        check(status)?;
        return Err(Error { code: 7, kind: "abi_mismatch".into(), message: "kiln_llm_get_api(1) refused".into() });
    }
    // SAFETY: a non-null table is static in the library.
    Ok(unsafe { &*table })
}

/// How one generation samples and stops; `Default` is the C++ defaults.
#[derive(Clone, Copy)]
pub struct GenerateOptions(pub kiln_llm_generate_options);

impl GenerateOptions {
    pub fn new() -> Result<GenerateOptions> {
        // SAFETY: all-zero is a valid value of the plain struct; the library fills it.
        let mut o: kiln_llm_generate_options = unsafe { std::mem::zeroed() };
        o.struct_size = std::mem::size_of::<kiln_llm_generate_options>();
        check(unsafe { (api()?.generate_options_init)(&mut o) })?;
        Ok(GenerateOptions(o))
    }
}

/// What the last generation did.
#[derive(Clone, Debug)]
pub struct Stats {
    pub prompt_tokens: i32,
    pub generated_tokens: i32,
    pub finish_reason: String,
}

/// One LLM program, its tokenizer and one KV cache.
pub struct Runner {
    raw: *mut kiln_llm_runner,
}

// SAFETY: the C API lets a runner be called from any thread (calls take turns); &mut self keeps one caller.
unsafe impl Send for Runner {}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            unsafe { (a.runner_free)(self.raw) };
        }
    }
}

fn take_string(a: &kiln_llm_api, p: *mut c_char) -> String {
    let s = owned_str(p);
    unsafe { (a.string_free)(p) };
    s
}

impl Runner {
    pub fn load(path: &str) -> Result<Runner> {
        let a = api()?;
        let path = c_string(path)?;
        let mut raw = ptr::null_mut();
        check(unsafe { (a.runner_load)(path.as_ptr(), ptr::null(), 0, &mut raw) })?;
        Ok(Runner { raw })
    }

    /// Generates after `prompt`, calling `on_text` with each piece as it comes (return false to
    /// stop); returns the whole new text.
    pub fn generate(
        &mut self,
        prompt: &str,
        options: &GenerateOptions,
        mut on_text: impl FnMut(&str) -> bool,
    ) -> Result<String> {
        unsafe extern "C" fn trampoline(user: *mut c_void, piece: *const c_char, size: usize) -> i32 {
            // A panic must not unwind into C: it stops the generation instead.
            catch_unwind(AssertUnwindSafe(|| {
                let f = &mut *(user as *mut &mut dyn FnMut(&str) -> bool);
                let bytes = std::slice::from_raw_parts(piece.cast::<u8>(), size);
                i32::from(f(&String::from_utf8_lossy(bytes)))
            }))
            .unwrap_or(0)
        }
        let a = api()?;
        let prompt = c_string(prompt)?;
        let mut f: &mut dyn FnMut(&str) -> bool = &mut on_text;
        let mut text = ptr::null_mut();
        check(unsafe {
            (a.generate)(
                self.raw,
                prompt.as_ptr(),
                &options.0,
                Some(trampoline),
                &mut f as *mut &mut dyn FnMut(&str) -> bool as *mut c_void,
                &mut text,
            )
        })?;
        Ok(take_string(a, text))
    }

    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<i32>> {
        let a = api()?;
        let mut count = 0usize;
        let call = |ids: &mut [i32], count: &mut usize| {
            check(unsafe {
                (a.encode)(
                    self.raw,
                    text.as_ptr().cast(),
                    text.len(),
                    i32::from(parse_special),
                    ids.as_mut_ptr(),
                    ids.len(),
                    count,
                )
            })
        };
        call(&mut [], &mut count)?; // how many, then the ids
        let mut ids = vec![0i32; count];
        call(&mut ids, &mut count)?;
        Ok(ids)
    }

    pub fn decode(&self, ids: &[i32]) -> Result<String> {
        let a = api()?;
        let mut text = ptr::null_mut();
        check(unsafe { (a.decode)(self.raw, ids.as_ptr(), ids.len(), 0, &mut text) })?;
        Ok(take_string(a, text))
    }

    pub fn stats(&self) -> Result<Stats> {
        let a = api()?;
        // SAFETY: all-zero is a valid value of the plain struct; the library fills it.
        let mut s: kiln_llm_stats = unsafe { std::mem::zeroed() };
        s.struct_size = std::mem::size_of::<kiln_llm_stats>();
        check(unsafe { (a.stats)(self.raw, &mut s) })?;
        Ok(Stats {
            prompt_tokens: s.prompt_tokens,
            generated_tokens: s.generated_tokens,
            finish_reason: owned_str(s.finish_reason),
        })
    }
}
