//! The handlers of the routes [`router`](crate::router) serves. `GET`
//! handlers only read the store; only `POST` handlers, after the
//! cross-site check and the form token, decide or stop. Each refusal is a
//! [`PageError`](crate::error::PageError), returned with `?`.

// A refusal here is the finished page sent for the request, built at most
// once per request and returned straight away: boxing it would cost an
// allocation and buy nothing.
#![allow(clippy::result_large_err)]

mod checks;
pub(crate) mod proposal;
pub(crate) mod run;
pub(crate) mod standing;
