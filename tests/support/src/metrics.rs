//! Reading the appliance's metrics endpoint (`GET /metrics`, the Prometheus text format)
//! as a scraper does (feature `metrics`): the e2e benches take their memory, latency and
//! error figures from it, and the e2e test `observability::` checks it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

pub use crate::ports::free_port;

/// The metrics address on a free loopback port, and the override that puts the
/// appliance's metrics there.
pub fn metrics_listen() -> (SocketAddr, (&'static str, String)) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    (addr, ("APPLIANCE_METRICS__LISTEN", addr.to_string()))
}

/// One answer of the endpoint.
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// `GET http://addr/path`, with a bearer token if given.
pub async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut req = client.get(format!("http://{addr}{path}"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let response = req.send().await.expect("metrics endpoint");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.text().await.unwrap();
    Answer {
        status,
        content_type,
        body,
    }
}

/// Scrapes `addr` (no token) and parses it; panics on anything but 200.
pub async fn scrape(addr: SocketAddr) -> Scrape {
    let answer = get(addr, "/metrics", None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    Scrape::parse(&answer.body)
}

/// One sample line: `name{label="value",…} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of one scrape.
#[derive(Debug, Default, Clone)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let mut scrape = Self::default();
        for line in text.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(sample) = parse_sample(line) {
                scrape.samples.push(sample);
            }
        }
        scrape
    }

    /// The samples named `name` whose labels include every pair of `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
    }

    /// The sum of the samples [`Self::matching`] (0 when there are none).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The one sample `name` with no labels, if present.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.matching(name, &[])
            .find(|s| s.labels.is_empty())
            .map(|s| s.value)
    }

    /// The histogram `base` (`…_bucket`, `…_count`) summed over the series
    /// whose labels include `labels`.
    pub fn histogram(&self, base: &str, labels: &[(&str, &str)]) -> Histogram {
        let mut buckets: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for s in self.matching(&format!("{base}_bucket"), labels) {
            let Some(le) = s.labels.get("le") else {
                continue;
            };
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::INFINITY)
            };
            let entry = buckets.entry(bound.to_bits()).or_insert((bound, 0.0));
            entry.1 += s.value;
        }
        let mut buckets: Vec<(f64, f64)> = buckets.into_values().collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram {
            buckets,
            count: self.sum(&format!("{base}_count"), labels),
        }
    }
}

/// A histogram: cumulative bucket counts by upper bound, ascending.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub count: f64,
}

impl Histogram {
    /// What was observed between `earlier` and this one.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let before = |bound: f64| {
            earlier
                .buckets
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0.0, |(_, n)| *n)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|(b, n)| (*b, n - before(*b)))
                .collect(),
            count: self.count - earlier.count,
        }
    }

    /// The `q` quantile, interpolated linearly within its bucket as Prometheus'
    /// `histogram_quantile` does (the lowest bucket from 0; the top finite bound if it
    /// falls in `+Inf`). `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(bound, count) in &self.buckets {
            if count >= rank {
                if bound.is_infinite() {
                    return Some(lower.0);
                }
                let in_bucket = count - lower.1;
                let share = if in_bucket > 0.0 {
                    (rank - lower.1) / in_bucket
                } else {
                    1.0
                };
                return Some(lower.0 + (bound - lower.0) * share);
            }
            lower = (bound, count);
        }
        Some(lower.0)
    }
}

/// `name{a="x",b="y"} 1.5` (an optional timestamp or exemplar after the value is
/// ignored).
fn parse_sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_owned();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if in_value {
                match c {
                    '\\' => {
                        let (_, escaped) = chars.next()?;
                        value.push(match escaped {
                            'n' => '\n',
                            other => other,
                        });
                    }
                    '"' => {
                        labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                        in_value = false;
                    }
                    other => value.push(other),
                }
                continue;
            }
            match c {
                '}' => {
                    end = Some(i);
                    break;
                }
                '"' => in_value = true,
                '=' | ',' | ' ' => {}
                other => key.push(other),
            }
        }
        rest = &inner[end? + 1..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}
