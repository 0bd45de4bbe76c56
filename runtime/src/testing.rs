//! What the workspace's GPU tests share: how a test that needs a GPU says it cannot run
//! here. On a machine without one it skips with a message; where a GPU is expected
//! (`SLUICE_REQUIRE_GPU` set, as `scripts/gpu-check run` sets it) the skip is a failure,
//! so a run there cannot pass green without having run the GPU code (as
//! `SLUICE_REQUIRE_MPI` and `SLUICE_REQUIRE_NVRTC` do for their tests).

/// The variable that turns every GPU test's skip into a failure.
pub const REQUIRE_GPU: &str = "SLUICE_REQUIRE_GPU";

/// Whether GPU tests must run (`SLUICE_REQUIRE_GPU` set to anything but `0` or empty).
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Reports that GPU test `test` cannot run here because of `why`: a line on stderr, or a
/// panic (the test fails) when [`gpu_required`].
pub fn skip_gpu_test(test: &str, why: &str) {
    assert!(!gpu_required(), "{test}: {REQUIRE_GPU} is set, but the test cannot run: {why}");
    eprintln!("{test}: skipped: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_fails_only_where_a_gpu_is_required() {
        // The variable is read at each call; tests in this process do not set it, so set
        // and clear it here around the two calls only.
        // SAFETY: no other thread of this test binary reads or writes the variable.
        unsafe { std::env::remove_var(REQUIRE_GPU) };
        skip_gpu_test("t", "no GPU");
        // SAFETY: as above.
        unsafe { std::env::set_var(REQUIRE_GPU, "1") };
        let caught = std::panic::catch_unwind(|| skip_gpu_test("t", "no GPU"));
        // SAFETY: as above.
        unsafe { std::env::remove_var(REQUIRE_GPU) };
        let message = caught.expect_err("a required GPU test fails");
        let message = message.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("SLUICE_REQUIRE_GPU is set") && message.contains("no GPU"), "{message}");
    }
}
