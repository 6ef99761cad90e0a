//! JSON-RPC for actions (`ethers.providers` in the worker): each request is an `rpc`
//! host call, POSTed here, never by the worker.
//!
//! Where a request may go:
//! * a chain of `[actions.rpc] chains`, named by id or by exactly its configured URL:
//!   sent to that URL whatever its address (the operator chose it; loopback and private
//!   addresses included, so `appliance dev` can offer its local anvil);
//! * any other `http(s)` URL the action gives: held to the rules of `fetch` (no address
//!   that is not globally reachable, checked in the resolver and on IP literals, unless
//!   `actions.fetch_allow_private`), no redirects followed.
//!
//! Bounds: each request has a body limit, a response limit and a time limit; each action
//! has a budget of bytes (requests and responses) and of time spent waiting for answers.
//! A request over its own limits fails (the action sees why); one over the action's
//! budget gets a `limit` reply (an uncaught one ends the action with kind `limit`).
//! Every request also counts as one of the action's fetches (in `host`).
//!
//! What the action sees never includes a configured URL (it may hold an API key).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use action_runtime::protocol::{MAX_FRAME_LEN, RpcReply, RpcRequest, RpcTarget};
use appliance_domain::settings::InvalidSetting;

use super::config::RpcConfig;
use super::fetch::{GuardedResolver, without_url};

/// The bounds of actions' JSON-RPC traffic (from [`RpcConfig`]).
#[derive(Debug, Clone, Copy)]
pub struct RpcLimits {
    pub request_timeout: Duration,
    pub max_request_bytes: usize,
    pub max_response_bytes: usize,
    pub max_bytes_per_action: u64,
    pub max_time_per_action: Duration,
}

impl RpcLimits {
    pub fn from_config(config: &RpcConfig) -> Self {
        Self {
            request_timeout: Duration::from_millis(config.request_timeout_ms),
            max_request_bytes: config.max_request_bytes,
            max_response_bytes: config.max_response_bytes,
            max_bytes_per_action: config.max_bytes_per_action,
            max_time_per_action: Duration::from_millis(config.max_time_per_action_ms),
        }
    }
}

/// What one action has used of its JSON-RPC budget.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RpcBudget {
    /// Request and response bytes moved.
    pub bytes: u64,
    /// Time spent waiting for answers.
    pub time: Duration,
}

/// Why the JSON-RPC client could not be set up (at start).
#[derive(Debug, thiserror::Error)]
pub enum RpcSetupError {
    #[error(transparent)]
    Setting(#[from] InvalidSetting),
    /// The id only: the URL may hold a credential.
    #[error("actions.rpc.chains.{0} is not a valid URL")]
    Url(u64),
    #[error("the JSON-RPC client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Sends actions' JSON-RPC requests.
#[derive(Clone)]
pub struct RpcClient {
    /// For URLs actions give: the fetch resolver's rules.
    guarded: reqwest::Client,
    /// For configured chains.
    trusted: reqwest::Client,
    chains: Arc<BTreeMap<u64, reqwest::Url>>,
    /// Configured URLs (normalised) → chain id.
    by_url: Arc<HashMap<String, u64>>,
    limits: RpcLimits,
    allow_private: bool,
}

/// Where one request goes.
enum Route {
    Chain(u64, reqwest::Url),
    Public(reqwest::Url),
}

fn client(guard: Option<bool>) -> Result<reqwest::Client, RpcSetupError> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy();
    if let Some(allow_private) = guard {
        builder = builder.dns_resolver(Arc::new(GuardedResolver { allow_private }));
    }
    builder.build().map_err(RpcSetupError::Client)
}

impl RpcClient {
    /// A client for `config`'s chains; `allow_private` is `actions.fetch_allow_private`
    /// (for URLs actions give).
    pub fn new(config: &RpcConfig, allow_private: bool) -> Result<Self, RpcSetupError> {
        let mut chains = BTreeMap::new();
        let mut by_url = HashMap::new();
        for (id, url) in config.chain_urls()? {
            let url = reqwest::Url::parse(url.expose()).map_err(|_| RpcSetupError::Url(id))?;
            by_url.insert(url.as_str().to_owned(), id);
            chains.insert(id, url);
        }
        Ok(Self {
            guarded: client(Some(allow_private))?,
            trusted: client(None)?,
            chains: Arc::new(chains),
            by_url: Arc::new(by_url),
            limits: RpcLimits::from_config(config),
            allow_private,
        })
    }

    /// The ids of the configured chains.
    pub fn chain_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.chains.keys().copied()
    }

    fn route(&self, target: &RpcTarget) -> Result<Route, String> {
        match target {
            RpcTarget::Chain(id) => match self.chains.get(id) {
                Some(url) => Ok(Route::Chain(*id, url.clone())),
                None => Err(format!("no JSON-RPC endpoint is configured for chain {id}")),
            },
            RpcTarget::Url(text) => {
                let url = reqwest::Url::parse(text).map_err(|e| format!("invalid URL: {e}"))?;
                if let Some(id) = self.by_url.get(url.as_str()) {
                    return Ok(Route::Chain(*id, url));
                }
                if !matches!(url.scheme(), "http" | "https") {
                    return Err("JSON-RPC supports http and https URLs only".to_owned());
                }
                if let Some(host) = url.host_str() {
                    let literal = host.trim_start_matches('[').trim_end_matches(']');
                    if let Ok(ip) = literal.parse::<IpAddr>()
                        && !self.allow_private
                        && let Some(why) = super::routable::not_global_reason(ip)
                    {
                        return Err(format!(
                            "JSON-RPC to {ip} is not allowed (not globally reachable: {why}; only the chains the operator configured may be private)"
                        ));
                    }
                }
                Ok(Route::Public(url))
            }
        }
    }

    /// Sends one request within the limits, counting it in `budget`.
    pub async fn call(&self, budget: &mut RpcBudget, request: RpcRequest) -> RpcReply {
        let limits = self.limits;
        let failed = |message: String| RpcReply::Failed { message };
        if request.body.len() > limits.max_request_bytes {
            return failed(format!(
                "JSON-RPC requests are limited to {} bytes (this one is {})",
                limits.max_request_bytes,
                request.body.len()
            ));
        }
        let request_bytes = request.body.len() as u64;
        if budget.bytes.saturating_add(request_bytes) > limits.max_bytes_per_action {
            return bytes_spent(limits);
        }
        let Some(time_left) = limits.max_time_per_action.checked_sub(budget.time) else {
            return time_spent(limits);
        };
        if time_left.is_zero() {
            return time_spent(limits);
        }
        let route = match self.route(&request.target) {
            Ok(route) => route,
            Err(message) => return failed(message),
        };
        let (client, url, chain) = match route {
            Route::Chain(id, url) => (&self.trusted, url, Some(id)),
            Route::Public(url) => (&self.guarded, url, None),
        };
        budget.bytes += request_bytes;
        let timeout = limits.request_timeout.min(time_left);
        let started = Instant::now();
        let allowance = limits.max_bytes_per_action.saturating_sub(budget.bytes);
        let exchange = exchange(
            client,
            url,
            request.body,
            limits.max_response_bytes,
            allowance,
        );
        let outcome = tokio::time::timeout(timeout, exchange).await;
        budget.time += started.elapsed();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(_) if timeout < limits.request_timeout => return time_spent(limits),
            Err(_) => {
                return RpcReply::Timeout {
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                };
            }
        };
        match outcome {
            Exchange::Answer { status, body } => {
                budget.bytes += body.len() as u64;
                let body = String::from_utf8_lossy(&body).into_owned();
                // The reply travels to the worker in one frame, escaped as JSON.
                let escaped = serde_json::to_string(&body).map_or(usize::MAX, |s| s.len());
                if escaped > MAX_FRAME_LEN - 64 * 1024 {
                    return failed(
                        "the JSON-RPC response is too large to hand to the action".into(),
                    );
                }
                RpcReply::Response { status, body }
            }
            Exchange::TooLarge { received } => {
                budget.bytes += received;
                failed(format!(
                    "JSON-RPC responses are limited to {} bytes",
                    limits.max_response_bytes
                ))
            }
            Exchange::OverBudget { received } => {
                budget.bytes += received;
                bytes_spent(limits)
            }
            Exchange::Failed(cause) => match chain {
                Some(id) => failed(format!(
                    "the JSON-RPC endpoint of chain {id} did not answer: {cause}"
                )),
                None => failed(format!("the JSON-RPC request failed: {cause}")),
            },
        }
    }
}

fn bytes_spent(limits: RpcLimits) -> RpcReply {
    RpcReply::Limit {
        message: format!(
            "JSON-RPC limit reached: an action may send and receive at most {} bytes",
            limits.max_bytes_per_action
        ),
    }
}

fn time_spent(limits: RpcLimits) -> RpcReply {
    RpcReply::Limit {
        message: format!(
            "JSON-RPC limit reached: an action may wait at most {} ms for JSON-RPC answers",
            limits.max_time_per_action.as_millis()
        ),
    }
}

enum Exchange {
    Answer { status: u16, body: Vec<u8> },
    TooLarge { received: u64 },
    OverBudget { received: u64 },
    Failed(String),
}

/// POSTs `body` and reads the answer, at most `max` bytes and `allowance` bytes of the
/// action's budget.
async fn exchange(
    client: &reqwest::Client,
    url: reqwest::Url,
    body: String,
    max: usize,
    allowance: u64,
) -> Exchange {
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    let mut response = match sent {
        Ok(r) => r,
        Err(e) => return Exchange::Failed(without_url(&e)),
    };
    let status = response.status().as_u16();
    let mut out = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let received = (out.len() + chunk.len()) as u64;
                if out.len() + chunk.len() > max {
                    return Exchange::TooLarge { received };
                }
                if received > allowance {
                    return Exchange::OverBudget { received };
                }
                out.extend_from_slice(&chunk);
            }
            Ok(None) => return Exchange::Answer { status, body: out },
            Err(e) => return Exchange::Failed(without_url(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use appliance_domain::settings::SecretString;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-route HTTP server on 127.0.0.1 answering every request with `body` after
    /// `delay`; it records each request body. Stopped when the test's runtime ends.
    async fn server(body: String, delay: Duration) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let body = body.clone();
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut tmp = [0u8; 4096];
                    loop {
                        let n = sock.read(&mut tmp).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&tmp[..n]);
                        let text = String::from_utf8_lossy(&buf).to_string();
                        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                            let len = head
                                .lines()
                                .find_map(|l| {
                                    let (k, v) = l.split_once(':')?;
                                    k.eq_ignore_ascii_case("content-length")
                                        .then(|| v.trim().parse::<usize>().ok())?
                                })
                                .unwrap_or(0);
                            if rest.len() >= len {
                                record.lock().unwrap().push(rest[..len].to_owned());
                                break;
                            }
                        }
                    }
                    tokio::time::sleep(delay).await;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(reply.as_bytes()).await;
                });
            }
        });
        (format!("http://{addr}"), seen)
    }

    fn config(chains: &[(u64, &str)]) -> RpcConfig {
        RpcConfig {
            chains: chains
                .iter()
                .map(|(id, url)| (id.to_string(), SecretString::new(*url)))
                .collect(),
            ..RpcConfig::default()
        }
    }

    fn request(target: RpcTarget) -> RpcRequest {
        RpcRequest {
            target,
            body: r#"{"method":"eth_chainId","params":[],"id":42,"jsonrpc":"2.0"}"#.into(),
        }
    }

    const ANSWER: &str = r#"{"jsonrpc":"2.0","id":42,"result":"0x7a69"}"#;

    fn message(reply: &RpcReply) -> &str {
        match reply {
            RpcReply::Failed { message } | RpcReply::Limit { message } => message,
            other => panic!("not a failure: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_configured_loopback_chain_answers_by_id_and_by_its_url_but_an_unlisted_loopback_url_is_refused()
     {
        let (url, seen) = server(ANSWER.into(), Duration::ZERO).await;
        let rpc = RpcClient::new(&config(&[(31337, &url)]), false).unwrap();
        let mut budget = RpcBudget::default();
        for target in [RpcTarget::Chain(31337), RpcTarget::Url(url.clone())] {
            let reply = rpc.call(&mut budget, request(target)).await;
            assert_eq!(
                reply,
                RpcReply::Response {
                    status: 200,
                    body: ANSWER.into()
                }
            );
        }
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert!(seen.lock().unwrap()[0].contains("eth_chainId"));
        // The same server under another loopback spelling is not the configured URL.
        let other = url.replace("127.0.0.1", "localhost");
        let reply = rpc.call(&mut budget, request(RpcTarget::Url(other))).await;
        assert!(
            message(&reply).contains("no address an action may reach"),
            "{reply:?}"
        );
        let literal = url.replace("127.0.0.1", "127.0.0.2");
        let reply = rpc
            .call(&mut budget, request(RpcTarget::Url(literal)))
            .await;
        assert!(message(&reply).contains("is not allowed"), "{reply:?}");
        let reply = rpc.call(&mut budget, request(RpcTarget::Chain(1))).await;
        assert_eq!(
            message(&reply),
            "no JSON-RPC endpoint is configured for chain 1"
        );
        assert_eq!(
            seen.lock().unwrap().len(),
            2,
            "nothing else reached the server"
        );
        let reply = rpc
            .call(
                &mut budget,
                request(RpcTarget::Url("file:///etc/passwd".into())),
            )
            .await;
        assert!(message(&reply).contains("http and https"), "{reply:?}");
    }

    #[tokio::test]
    async fn a_configured_url_never_appears_in_what_the_action_sees() {
        // Nothing listens on port 1: the connection fails.
        let secret = "http://127.0.0.1:1/v3/secret-api-key";
        let rpc = RpcClient::new(&config(&[(5, secret)]), false).unwrap();
        let reply = rpc
            .call(&mut RpcBudget::default(), request(RpcTarget::Chain(5)))
            .await;
        let text = message(&reply);
        assert!(
            text.starts_with("the JSON-RPC endpoint of chain 5 did not answer"),
            "{text}"
        );
        assert!(
            !text.contains("secret-api-key") && !text.contains(":1/"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn each_bound_is_enforced_with_its_own_message() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":"0x{}"}}"#,
            "ab".repeat(3000)
        );
        let (url, _) = server(big.clone(), Duration::ZERO).await;
        let (slow, _) = server(ANSWER.into(), Duration::from_secs(5)).await;
        let base = config(&[(1, &url), (2, &slow)]);

        // Per request: the body.
        let rpc = RpcClient::new(
            &RpcConfig {
                max_request_bytes: 10,
                ..base.clone()
            },
            false,
        )
        .unwrap();
        let reply = rpc
            .call(&mut RpcBudget::default(), request(RpcTarget::Chain(1)))
            .await;
        assert!(
            message(&reply).starts_with("JSON-RPC requests are limited to 10 bytes"),
            "{reply:?}"
        );

        // Per request: the response.
        let rpc = RpcClient::new(
            &RpcConfig {
                max_response_bytes: 1000,
                ..base.clone()
            },
            false,
        )
        .unwrap();
        let reply = rpc
            .call(&mut RpcBudget::default(), request(RpcTarget::Chain(1)))
            .await;
        assert_eq!(
            message(&reply),
            "JSON-RPC responses are limited to 1000 bytes"
        );
        assert!(matches!(reply, RpcReply::Failed { .. }));

        // Per request: the time.
        let rpc = RpcClient::new(
            &RpcConfig {
                request_timeout_ms: 200,
                ..base.clone()
            },
            false,
        )
        .unwrap();
        let reply = rpc
            .call(&mut RpcBudget::default(), request(RpcTarget::Chain(2)))
            .await;
        assert_eq!(reply, RpcReply::Timeout { timeout_ms: 200 });

        // Per action: the bytes. The first answer fits, the second does not.
        let rpc = RpcClient::new(
            &RpcConfig {
                max_bytes_per_action: (big.len() + 200) as u64,
                ..base.clone()
            },
            false,
        )
        .unwrap();
        let mut budget = RpcBudget::default();
        let first = rpc.call(&mut budget, request(RpcTarget::Chain(1))).await;
        assert!(
            matches!(first, RpcReply::Response { status: 200, .. }),
            "{first:?}"
        );
        let second = rpc.call(&mut budget, request(RpcTarget::Chain(1))).await;
        assert!(matches!(second, RpcReply::Limit { .. }), "{second:?}");
        assert!(message(&second).contains(&format!("at most {} bytes", big.len() + 200)));
        // Spent is spent: nothing more is sent.
        let third = rpc.call(&mut budget, request(RpcTarget::Chain(1))).await;
        assert!(matches!(third, RpcReply::Limit { .. }), "{third:?}");

        // Per action: the time. The slow answer uses up the 300 ms the action has.
        let rpc = RpcClient::new(
            &RpcConfig {
                max_time_per_action_ms: 300,
                ..base.clone()
            },
            false,
        )
        .unwrap();
        let mut budget = RpcBudget::default();
        let reply = rpc.call(&mut budget, request(RpcTarget::Chain(2))).await;
        assert_eq!(
            message(&reply),
            "JSON-RPC limit reached: an action may wait at most 300 ms for JSON-RPC answers"
        );
        assert!(matches!(reply, RpcReply::Limit { .. }));
        let again = rpc.call(&mut budget, request(RpcTarget::Chain(1))).await;
        assert!(matches!(again, RpcReply::Limit { .. }), "{again:?}");
    }

    #[test]
    fn chain_ids_and_urls_are_checked() {
        let bad_id = config(&[]);
        let mut bad_id = bad_id;
        bad_id
            .chains
            .insert("mainnet".into(), SecretString::new("http://x"));
        assert!(bad_id.validate().unwrap_err().0.contains("not a chain id"));
        let bad_url = config(&[(1, "ws://x")]);
        assert!(
            bad_url
                .validate()
                .unwrap_err()
                .0
                .contains("actions.rpc.chains.1")
        );
        let too_big = RpcConfig {
            max_response_bytes: MAX_RPC_RESPONSE_BYTES_FOR_TEST + 1,
            ..RpcConfig::default()
        };
        assert!(too_big.validate().is_err());
        assert!(
            config(&[(31337, "http://127.0.0.1:8545")])
                .validate()
                .is_ok()
        );
    }

    const MAX_RPC_RESPONSE_BYTES_FOR_TEST: usize = super::super::config::MAX_RPC_RESPONSE_BYTES;
}
