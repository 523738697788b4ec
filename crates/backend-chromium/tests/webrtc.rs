//! WebRTC in real headless Chromium sends no UDP around the egress guard.
//!
//! A page on the allowed host (127.0.0.2) creates an `RTCPeerConnection`
//! whose STUN server and remote ICE candidate are a UDP listener on
//! 127.0.0.3, and reports when ICE gathering is complete. The test waits for
//! that report or the listener's first datagram, then drains the listener
//! without blocking and counts its datagrams. Without a proxy
//! (the host's explicit opt-out) the same page reaches the listener, which
//! shows the page and the listener work; behind the guard the listener
//! receives nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use countersign_backend_chromium::{Chromium, ChromiumOptions, Tab};
use countersign_egress_guard::EgressGuard;

/// The address of the UDP listener: loopback, and not on the policy's list.
const LISTENER_IP: &str = "127.0.0.3";

/// How long ICE gathering may take: Chromium gives up on an unanswered STUN
/// server well within it.
const GATHERING_BOUND: Duration = Duration::from_secs(60);

/// The page: an `RTCPeerConnection` with the listener as STUN server, a data
/// channel, an offer set as local description, the offer with the other DTLS
/// role as the remote answer and the listener as remote ICE candidate. It
/// writes `complete <candidates>` into `#state` once gathering is complete,
/// `error <message>` if a step fails.
const PAGE: &str = r#"<!doctype html>
<title>webrtc</title>
<output id="state">starting</output>
<script>
const state = document.getElementById('state');
(async () => {
  const pc = new RTCPeerConnection({ iceServers: [{ urls: 'stun:@HOST@:@PORT@' }] });
  let candidates = 0;
  pc.addEventListener('icecandidate', (event) => { if (event.candidate) candidates += 1; });
  const complete = new Promise((resolve) => {
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') resolve();
    });
  });
  pc.createDataChannel('probe');
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const answer = offer.sdp.replace('a=setup:actpass', 'a=setup:active');
  await pc.setRemoteDescription({ type: 'answer', sdp: answer });
  await pc.addIceCandidate({
    candidate: 'candidate:1 1 udp 2122260223 @HOST@ @PORT@ typ host',
    sdpMid: '0',
    sdpMLineIndex: 0,
  });
  if (pc.iceGatheringState !== 'complete') await complete;
  state.textContent = `complete ${candidates}`;
})().catch((error) => { state.textContent = `error ${error}`; });
</script>
"#;

/// Serves the page for `listener` on 127.0.0.2, on a free port.
async fn serve_page(listener: SocketAddr) -> SocketAddr {
    let page = PAGE
        .replace("@HOST@", &listener.ip().to_string())
        .replace("@PORT@", &listener.port().to_string());
    let app = Router::new().route("/", get(move || async move { Html(page) }));
    let server = tokio::net::TcpListener::bind((support::SITE_IP, 0))
        .await
        .unwrap();
    let address = server.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(server, app).await });
    address
}

/// What the page and the listener showed.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// The page's `#state`: `complete <candidates>` once ICE gathering is
    /// complete.
    state: String,
    /// Datagrams the listener received.
    datagrams: usize,
}

/// Opens the page in a fresh browser launched with `options` and waits,
/// within [`GATHERING_BOUND`], until the page reports ICE gathering complete
/// (or a failed step) or the listener has received a datagram; then drains
/// the listener once more.
async fn run_page(options: ChromiumOptions) -> Seen {
    let listener = UdpSocket::bind((LISTENER_IP, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let site = serve_page(listener.local_addr().unwrap()).await;
    let policy = support::policy();
    let chromium = Chromium::launch(options).await.unwrap();
    let session = chromium.new_session(policy.clone()).await.unwrap();
    let url = policy
        .authorize_destination(&format!("http://{site}/"))
        .await
        .unwrap();
    let tab = session.open(&url).await.unwrap();
    let deadline = Instant::now() + GATHERING_BOUND;
    let mut datagrams = 0;
    let state = loop {
        let state = page_state(&tab).await;
        datagrams += drain(&listener);
        if state.starts_with("complete") || state.starts_with("error") || datagrams > 0 {
            break state;
        }
        assert!(
            Instant::now() < deadline,
            "ice gathering not complete within {GATHERING_BOUND:?}: `{state}`"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    datagrams += drain(&listener);
    chromium.close().await.unwrap();
    Seen { state, datagrams }
}

/// The page's `#state`.
async fn page_state(tab: &Tab) -> String {
    let state = tab
        .inspect("function () { return document.getElementById('state').textContent; }")
        .await
        .unwrap();
    state.as_str().unwrap_or_default().to_owned()
}

/// Reads every datagram waiting on `listener` without blocking and returns
/// how many there were.
fn drain(listener: &UdpSocket) -> usize {
    let mut buffer = [0u8; 2048];
    let mut count = 0;
    loop {
        match listener.recv_from(&mut buffer) {
            Ok(_) => count += 1,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return count,
            Err(e) => panic!("reading the listener failed: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webrtc_sends_no_udp_around_the_guard() {
    // Control: without a proxy the page's STUN requests and ICE checks
    // reach the listener.
    let direct = run_page(support::options().allow_unproxied_egress()).await;
    eprintln!("without a proxy: {direct:?}");
    assert!(direct.datagrams > 0, "{direct:?}");

    // Behind the guard: gathering completes with no candidate, so no
    // STUN request and no connectivity check is ever sent.
    let guard = EgressGuard::bind(support::policy(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let options = support::options().egress_proxy(format!("http://{}", guard.local_addr()));
    let guarded = run_page(options).await;
    eprintln!("behind the guard: {guarded:?}");
    assert_eq!(
        guarded,
        Seen {
            state: "complete 0".to_owned(),
            datagrams: 0
        }
    );
}
