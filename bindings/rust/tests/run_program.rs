//! The crate against the installed wheel: errors as values, the version refusal, and a program that
//! tests/test_c_api.py exported, whose outputs must be Python's bytes.
//!
//! KILN_TEST_PROGRAM, KILN_TEST_INPUT and KILN_TEST_EXPECTED name the program and two tensor files
//! in examples/c's format (per tensor: u32 dtype, u32 ndim, i64 sizes, row-major bytes).
use std::env;
use std::fs;

use kiln::{DType, Program, SpecKind, Tensor};

fn read_tensors(path: &str) -> Vec<(DType, Vec<i64>, Vec<u8>)> {
    let data = fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut out, mut at) = (Vec::new(), 0usize);
    let u32_at = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
    while at < data.len() {
        let dtype = DType::from_code(u32_at(at) as i32).expect("a kiln dtype");
        let ndim = u32_at(at + 4) as usize;
        at += 8;
        let sizes: Vec<i64> =
            (0..ndim).map(|d| i64::from_le_bytes(data[at + 8 * d..at + 8 * d + 8].try_into().unwrap())).collect();
        at += 8 * ndim;
        let n = sizes.iter().product::<i64>() as usize * dtype.size();
        out.push((dtype, sizes, data[at..at + n].to_vec()));
        at += n;
    }
    out
}

fn test_files() -> (String, String, String) {
    let var = |name: &str| {
        env::var(name).unwrap_or_else(|_| panic!("{name} is not set: tests/test_c_api.py runs this test with it"))
    };
    (var("KILN_TEST_PROGRAM"), var("KILN_TEST_INPUT"), var("KILN_TEST_EXPECTED"))
}

#[test]
fn runs_a_program_with_pythons_bytes() {
    let (program_path, input, expected) = test_files();
    let program = Program::load(&program_path).expect("load");
    assert_eq!(program.method_names().unwrap(), vec!["forward".to_string()]);
    let mut method = program.load_method("forward").expect("load_method");
    drop(program); // a method outlives its program
    let specs = method.specs(SpecKind::Input).unwrap();
    let inputs: Vec<Tensor> =
        read_tensors(&input).into_iter().map(|(d, s, b)| Tensor::from_bytes(d, &s, &b).unwrap()).collect();
    assert_eq!(specs.len(), inputs.len());
    assert_eq!(specs[0].max_sizes, inputs[0].sizes().unwrap());
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let outputs = method.run(&refs).expect("run");
    let want = read_tensors(&expected);
    assert_eq!(outputs.len(), want.len());
    for (got, (dtype, sizes, bytes)) in outputs.iter().zip(&want) {
        assert_eq!(got.dtype().unwrap(), Some(*dtype));
        assert_eq!(&got.sizes().unwrap(), sizes);
        assert!(got.bytes().unwrap() == &bytes[..], "the outputs differ from Python's bytes");
    }
    println!(
        "kiln {} ran {program_path}: {} outputs equal Python's",
        kiln::build_info().unwrap().version,
        outputs.len()
    );
}

#[test]
fn a_view_of_a_slice_runs_too_and_bad_inputs_are_errors() {
    let (program_path, input, _) = test_files();
    let bytes = fs::read(&program_path).unwrap();
    let program = Program::from_bytes(&bytes, &Default::default()).expect("from_bytes");
    let mut method = program.load_method("forward").unwrap();
    let (_, sizes, data) = read_tensors(&input).remove(0);
    let floats: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let view = Tensor::view(&floats, &sizes).unwrap();
    assert_eq!(method.run(&[&view]).unwrap().len(), 1);
    // Wrong count, wrong dtype, sizes beyond the slice: errors, never a crash.
    assert_eq!(method.run(&[]).unwrap_err().kind, "invalid_input");
    let ints = vec![0i32; floats.len()];
    let err = method.run(&[&Tensor::view(&ints, &sizes).unwrap()]).unwrap_err();
    assert_eq!(err.kind, "invalid_input", "{err}");
    let err = Tensor::view(&floats[..3], &sizes).expect_err("too small a slice is refused");
    assert_eq!(err.kind, "invalid_argument");
    assert!(err.message.contains("bytes"), "{err}");
}

#[test]
fn errors_are_values() {
    let err = Program::load("/nonexistent/model.kiln").err().expect("a missing file is an error");
    assert_eq!(err.kind, "not_found", "{err}");
    let err = Program::from_bytes(&[0u8; 100], &Default::default()).err().expect("garbage is refused");
    assert_eq!(err.kind, "invalid_program", "{err}");
    let err = kiln::api_version(1000).err().expect("a future version is refused");
    assert_eq!(err.kind, "abi_mismatch");
    assert!(err.message.contains("version 1000 was asked for"), "{err}");
    assert!(kiln::registered_kernel_count().unwrap() > 50);
}
