//! A saved [`PipelineState`] records each filter's input position (`filter`, and `somes`,
//! the fused map + filter of generated pipelines): a resume from it yields exactly the
//! elements of an uninterrupted pass after the saved position, without testing any element
//! before it again, and the state's size does not depend on the dataset's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_runtime::stage::{
    Ctx, Dataset, Parallelism, PipelineState, RuntimeOptions, StagePosition, from_vec, range,
};

fn ctx() -> Ctx {
    Ctx::new(&RuntimeOptions::default())
}

fn blank(epoch: u64, position: u64) -> PipelineState {
    PipelineState {
        pipeline: "p".into(),
        fingerprint: 1,
        epoch,
        position,
        stages: Vec::new(),
        redeal: Vec::new(),
    }
}

/// Pulls `k` elements of pass `epoch`, saves the state there (with the stage positions,
/// while the pass runs), and returns it with what was pulled.
fn stop_at<D: Dataset>(d: &D, epoch: u64, k: u64) -> (Vec<D::Item>, PipelineState) {
    let mut pass = d.stream_from(&ctx().with_epoch(epoch), 0).unwrap();
    let first = pass.by_ref().take(k as usize).collect::<sluice_runtime::Result<Vec<_>>>().unwrap();
    let state = blank(epoch, k).with_stage_positions(d);
    drop(pass);
    // Through the file format, as a new process would read it.
    (first, PipelineState::from_bytes(&state.to_bytes(), "state").unwrap())
}

fn resume<D: Dataset>(d: &D, s: &PipelineState) -> Vec<D::Item> {
    s.resume(d, &ctx()).unwrap().collect::<sluice_runtime::Result<Vec<_>>>().unwrap()
}

/// Shuffled (a new order each epoch), mapped on 3 threads, filtered by value, then
/// `after` on top; `tested` counts the filter's calls.
fn pipeline(n: u64, tested: Arc<AtomicU64>) -> impl Dataset<Item = u64> {
    range(0..n)
        .shuffle(64, 7)
        .reshuffle_each_epoch(true)
        .map(|x| x * 3 + 1)
        .num_parallel(Parallelism::Fixed(3))
        .filter(move |x| {
            tested.fetch_add(1, Ordering::Relaxed);
            x % 5 != 0 && x % 7 != 3
        })
}

#[test]
fn a_filter_resumes_exactly_from_its_saved_input_position_without_testing_what_is_before() {
    let tested = Arc::new(AtomicU64::new(0));
    let ds = pipeline(2_000, tested.clone()).prefetch(3);
    for epoch in 0..2 {
        let full: Vec<u64> =
            ds.stream_from(&ctx().with_epoch(epoch), 0).unwrap().map(Result::unwrap).collect();
        assert!(full.len() > 1_000 && full.len() < 2_000);
        for k in [1, 2, 3, 17, 500, 1_001, full.len() as u64 - 1, full.len() as u64] {
            let (first, state) = stop_at(&ds, epoch, k);
            assert_eq!(first, full[..k as usize]);
            assert_eq!(state.stages.len(), 1, "epoch {epoch} at {k}: {state:?}");
            let input = state.stages[0].input;
            assert_eq!(state.stages[0].output, k);
            assert!(input >= k, "at {k}: input {input}");
            tested.store(0, Ordering::Relaxed);
            let rest = resume(&ds, &state);
            assert_eq!(rest, full[k as usize..], "epoch {epoch} from {k}");
            // The filter tested only the inputs after its saved position.
            assert_eq!(tested.load(Ordering::Relaxed), 2_000 - input, "epoch {epoch} from {k}");
        }
    }
}

#[test]
fn a_batched_pipeline_resumes_inside_and_between_batches() {
    let tested = Arc::new(AtomicU64::new(0));
    // The filter's position falls inside the batches of the fused map + filter's input
    // (`somes` over the chunks' input) and anywhere in the batch stage's.
    let ds = from_vec((0..40u64).map(|f| (0..50).map(|i| f * 1_000 + i).collect::<Vec<_>>()).collect())
        .interleave(|v: Vec<u64>| from_vec(v), 4, 3)
        .num_parallel(3)
        .deterministic(true)
        .shuffle(100, 11)
        .map(|x| (x % 3 != 0).then_some(x * 2))
        .num_parallel(Parallelism::Fixed(2))
        .somes()
        .map(|x| x + 1)
        .filter(move |x| {
            tested.fetch_add(1, Ordering::Relaxed);
            x % 4 != 1
        })
        .chunks(6, false)
        .prefetch(2);
    let full: Vec<Vec<u64>> = ds.stream_from(&ctx(), 0).unwrap().map(Result::unwrap).collect();
    for k in [1, 5, 77, full.len() as u64 - 1] {
        let (_, state) = stop_at(&ds, 0, k);
        // Top-down: the filter (after 6k outputs), then `somes` below it.
        assert_eq!(state.stages.len(), 2, "{state:?}");
        assert_eq!(state.stages[0].output, 6 * k);
        assert_eq!(state.stages[1].output, state.stages[0].input);
        assert_eq!(resume(&ds, &state), full[k as usize..], "from {k}");
    }
}

#[test]
fn without_stage_positions_a_resume_recomputes_them_exactly() {
    // A version 1 state has none; a state whose positions do not fit is not trusted.
    let ds = pipeline(800, Arc::default()).chunks(4, false);
    let full: Vec<Vec<u64>> = ds.stream_from(&ctx().with_epoch(1), 0).unwrap().map(Result::unwrap).collect();
    for k in [0, 3, 50, full.len() as u64] {
        assert_eq!(resume(&ds, &blank(1, k)), full[k as usize..], "from {k}");
        let mut wrong = blank(1, k);
        wrong.stages = vec![StagePosition::filter(4 * k + 1, 0)];
        assert_eq!(resume(&ds, &wrong), full[k as usize..], "from {k}, positions of another place");
    }
}

#[test]
fn the_state_does_not_grow_with_the_dataset() {
    let sizes: Vec<usize> = [1_000u64, 200_000]
        .into_iter()
        .map(|n| {
            let ds = pipeline(n, Arc::default()).chunks(8, false).prefetch(2);
            let (_, state) = stop_at(&ds, 0, n / 16);
            assert_eq!(state.stages.len(), 1);
            state.to_bytes().len()
        })
        .collect();
    assert_eq!(sizes[0], sizes[1]);
    assert_eq!(sizes[0], 4 + 1 + 2 + 1 + 24 + 2 + 17 + 2 + 4);
}
