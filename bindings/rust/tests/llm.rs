//! The LLM runner through the crate (feature `llm`): greedy text equal to Python's, streamed piece
//! by piece, and the tokenizer. tests/test_c_api.py sets KILN_TEST_LLM_PROGRAM, KILN_TEST_LLM_PROMPT
//! and KILN_TEST_LLM_EXPECTED (a file with Python's greedy text of 12 new tokens).
#![cfg(feature = "llm")]

use std::env;
use std::fs;

use kiln::llm::{GenerateOptions, Runner};

#[test]
fn streams_pythons_greedy_text() {
    let var = |name: &str| env::var(name).unwrap_or_else(|_| panic!("{name} is not set: tests/test_c_api.py sets it"));
    let mut runner = Runner::load(&var("KILN_TEST_LLM_PROGRAM")).expect("load");
    let prompt = var("KILN_TEST_LLM_PROMPT");
    let want = fs::read_to_string(var("KILN_TEST_LLM_EXPECTED")).unwrap();
    let mut options = GenerateOptions::new().unwrap();
    options.0.max_new_tokens = 12;
    options.0.temperature = 0.0;
    let mut streamed = String::new();
    let text = runner
        .generate(&prompt, &options, |piece| {
            streamed.push_str(piece);
            true
        })
        .expect("generate");
    assert_eq!(text, want);
    assert_eq!(streamed, want);
    let stats = runner.stats().unwrap();
    assert!(stats.generated_tokens > 0 && !stats.finish_reason.is_empty(), "{stats:?}");
    let ids = runner.encode(&prompt, true).unwrap();
    assert_eq!(runner.decode(&ids).unwrap(), prompt);
    // Stopping from the closure: fewer pieces, finish_reason "cancelled".
    runner.generate(&prompt, &options, |_| false).unwrap();
    assert_eq!(runner.stats().unwrap().finish_reason, "cancelled");
    assert_eq!(runner.decode(&[i32::MAX]).unwrap_err().kind, "invalid_argument");
}
