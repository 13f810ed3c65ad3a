//! The daemon's HTTP accept loop: the axum router served over HTTP/1.1 by
//! hyper, with a deadline on reading each request's headers.
//!
//! `axum::serve` reads headers with no deadline (hyper's auto connection
//! sets no timer), so 200 connections trickling header bytes were all held
//! open for as long as their clients liked (THREATS.md row 19, slowloris).
//! Here each request's headers must arrive whole within
//! [`HEADER_READ_TIMEOUT`], and a kept-alive connection that sends no new
//! request within that time is closed too; a request whose headers arrived
//! may take as long as its handler needs (an evaluation, an event stream).
//! On shutdown the loop stops accepting, asks every connection to finish
//! its request in flight, and waits for them.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How long a client has to send a request's headers (and an idle
/// kept-alive connection to start its next request).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn serve(listener: TcpListener, app: axum::Router, shutdown: CancellationToken) -> anyhow::Result<()> {
    // Each connection holds a receiver: `closed()` on the sender waits for
    // every connection to end.
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, most likely: wait, not spin.
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let mut stop = stop_rx.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let app = app.clone();
                async move { app.oneshot(req.map(axum::body::Body::new)).await }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(conn);
            let mut stopping = false;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "connection ended");
                        }
                        break;
                    }
                    changed = stop.changed(), if !stopping => {
                        stopping = true;
                        if changed.is_ok() {
                            conn.as_mut().graceful_shutdown();
                        }
                    }
                }
            }
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    let _ = stop_tx.send(true);
    open_tx.closed().await;
    Ok(())
}
