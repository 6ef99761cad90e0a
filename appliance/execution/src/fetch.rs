//! `fetch` for actions, performed by the appliance on the worker's behalf, with bounds
//! on time, response size and (by default) destination: every address that is not
//! globally reachable (private, loopback, link-local, shared, benchmarking, reserved,
//! multicast, documentation, and IPv6 prefixes embedding such an IPv4 address: see
//! `super::routable`, transcribed from the IANA registries) is refused unless
//! `actions.fetch_allow_private` is set. The check happens in the DNS resolver, so a
//! name that resolves to such an address (DNS rebinding) is refused too, and on IP
//! literals. Redirects are not followed: the action sees the 3xx and a fetch of its
//! `Location` is checked again.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

pub use action_runtime::protocol::{FetchRequest, FetchResponse};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

#[derive(Debug, Clone)]
pub struct FetchLimits {
    pub timeout: Duration,
    pub max_response_bytes: usize,
    pub max_request_bytes: usize,
    pub allow_private: bool,
}

/// An HTTP client for actions.
#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    limits: FetchLimits,
}

/// True for addresses an action may not reach by default: every address that is not
/// globally reachable by the IANA special-purpose registries (`super::routable`).
pub fn is_private(ip: IpAddr) -> bool {
    super::routable::is_blocked(ip)
}

/// Resolves names, refusing private answers unless allowed.
pub(crate) struct GuardedResolver {
    pub(crate) allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow_private || !is_private(a.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(format!("{host} resolves to no address an action may reach").into());
            }
            let out: Addrs = Box::new(allowed.into_iter());
            Ok(out)
        })
    }
}

/// Why an action's fetch was refused or failed. The text is what the action sees: it
/// never carries the URL (which may hold secrets in its query).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    #[error("fetch supports http and https URLs only")]
    Scheme,
    #[error("fetch to {ip} is not allowed (not globally reachable: {why})")]
    NotGlobal { ip: IpAddr, why: &'static str },
    #[error("invalid HTTP method")]
    Method,
    #[error("fetch request bodies are limited to {0} bytes")]
    RequestTooLarge(usize),
    #[error("fetch responses are limited to {0} bytes")]
    ResponseTooLarge(usize),
    /// The request or its response failed (the cause, without the URL).
    #[error("fetch failed: {0}")]
    Failed(String),
    /// The HTTP client could not be built (at start, not per fetch).
    #[error("the fetch client: {0}")]
    Client(#[source] reqwest::Error),
}

impl Fetcher {
    pub fn new(limits: FetchLimits) -> Result<Self, FetchError> {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .dns_resolver(Arc::new(GuardedResolver {
                allow_private: limits.allow_private,
            }))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(limits.timeout)
            .no_proxy()
            .build()
            .map_err(FetchError::Client)?;
        Ok(Self { client, limits })
    }

    /// Performs one fetch. Errors are messages for the action (never secrets).
    pub async fn fetch(&self, req: FetchRequest) -> Result<FetchResponse, FetchError> {
        let url =
            reqwest::Url::parse(&req.url).map_err(|e| FetchError::InvalidUrl(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::Scheme);
        }
        // An IP literal bypasses the resolver: check it here.
        if let Some(host) = url.host_str() {
            let literal = host.trim_start_matches('[').trim_end_matches(']');
            if let Ok(ip) = literal.parse::<IpAddr>()
                && !self.limits.allow_private
                && let Some(why) = super::routable::not_global_reason(ip)
            {
                return Err(FetchError::NotGlobal { ip, why });
            }
        }
        let method = if req.method.is_empty() {
            "GET"
        } else {
            req.method.as_str()
        };
        let method = method
            .parse::<reqwest::Method>()
            .map_err(|_| FetchError::Method)?;
        let mut builder = self.client.request(method, url);
        for (name, value) in &req.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(body) = req.body {
            if body.len() > self.limits.max_request_bytes {
                return Err(FetchError::RequestTooLarge(self.limits.max_request_bytes));
            }
            builder = builder.body(body);
        }
        let mut response = builder
            .send()
            .await
            .map_err(|e| FetchError::Failed(without_url(&e)))?;
        let status = response.status();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| FetchError::Failed(without_url(&e)))?
        {
            if body.len() + chunk.len() > self.limits.max_response_bytes {
                return Err(FetchError::ResponseTooLarge(self.limits.max_response_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(FetchResponse {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or("").to_owned(),
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

/// The error's message and its causes, without the URL (which may carry secrets in
/// its query); e.g. "error sending request: <url>: x resolves to no address …".
pub(crate) fn without_url(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "the request timed out".to_owned();
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if let Some(url) = err.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "192.0.0.1",
            "224.0.0.251",
            "64:ff9b::10.0.0.1",
            "2002:7f00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "ff02::1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn private_destinations_are_refused_by_default() {
        let fetcher = Fetcher::new(FetchLimits {
            timeout: Duration::from_secs(2),
            max_response_bytes: 1024,
            max_request_bytes: 1024,
            allow_private: false,
        })
        .unwrap();
        for url in [
            "http://127.0.0.1:1/",
            "http://[::1]:1/",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:1/",
            "http://198.18.0.1:1/",
            "http://[64:ff9b::7f00:1]:1/",
            "http://[2002:7f00:1::1]:1/",
            "http://240.0.0.1:1/",
        ] {
            let err = fetcher
                .fetch(FetchRequest {
                    url: url.into(),
                    method: "GET".into(),
                    headers: Default::default(),
                    body: None,
                })
                .await
                .unwrap_err();
            assert!(
                matches!(err, FetchError::NotGlobal { .. })
                    || matches!(&err, FetchError::Failed(why) if why.contains("no address")),
                "{url}: {err}"
            );
        }
        let err = fetcher
            .fetch(FetchRequest {
                url: "file:///etc/passwd".into(),
                method: "GET".into(),
                headers: Default::default(),
                body: None,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Scheme), "{err}");
        assert!(err.to_string().contains("http and https"), "{err}");
    }
}
