//! The one tokio runtime of the process, owned by the storage layer: `object_store` is
//! async, the pipeline's reader threads are plain threads that block on it
//! ([`block_on`]), and ranged GETs run on it concurrently ([`spawn`]).

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// The runtime, started on first use: two worker threads (the work is waiting on sockets;
/// decompression and parsing stay on the pipeline's threads).
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        install_tls();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-storage")
            .enable_all()
            .build()
            .expect("the storage layer's tokio runtime starts")
    })
}

/// Runs `f` to completion on the storage runtime, blocking the calling (plain) thread.
/// Must not be called from a task of that runtime.
pub fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Starts `f` on the storage runtime.
pub fn spawn<F>(f: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    runtime().spawn(f)
}

/// Makes rustls with ring the process's TLS provider (no OpenSSL), before any client is
/// built; an error means one is installed already, which is as good.
pub fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
