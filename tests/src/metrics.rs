//! `/metrics` read as a scraper reads it, written once for every test: a
//! sample is a name, its labels and a value, and a test asks for the one
//! sample of a name whose labels it names (a line that merely starts with
//! the same text, `trustmsg_x_total` for `trustmsg_x`, is another metric).

use std::collections::BTreeMap;

/// One sample line: `name{label="value",…} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric's name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// What one scrape of `/metrics` said.
#[derive(Debug, Clone)]
pub struct Metrics {
    text: String,
    samples: Vec<Sample>,
}

impl Metrics {
    /// What `GET url` (a `/metrics` endpoint) says now, asked through `http`.
    pub async fn fetch(http: &reqwest::Client, url: &str) -> Self {
        let text = http
            .get(url)
            .send()
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("the metrics text");
        Self::parse(&text)
    }

    /// Reads the Prometheus text format: comments and blank lines are
    /// skipped; a sample line that cannot be read fails the test.
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| sample(l).unwrap_or_else(|| panic!("an unreadable /metrics line: {l:?}")))
            .collect();
        Self {
            text: text.to_string(),
            samples,
        }
    }

    /// The text as served, for a failure message.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Every sample of `name` (any labels).
    pub fn samples(&self, name: &str) -> impl Iterator<Item = &Sample> {
        let name = name.to_string();
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The value of the sample of `name` that has every label of `labels`
    /// (and perhaps others); `None` when there is none. Fails the test when
    /// several match: the labels given do not name one sample.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut matching = self.samples(name).filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        });
        let first = matching.next()?;
        let more: Vec<&Sample> = matching.collect();
        assert!(
            more.is_empty(),
            "{name} with {labels:?} names several samples: {first:?}, {more:?}"
        );
        Some(first.value)
    }

    /// The samples of `name` summed over their labels; 0 when there is none
    /// (a counter before it first counts).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples(name).map(|s| s.value).sum()
    }
}

impl std::fmt::Display for Metrics {
    /// The text as served.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// One sample line, or `None` when it is not one.
fn sample(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, BTreeMap::new()),
        Some((name, rest)) => (name, labels(rest.strip_suffix('}')?)?),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// `k="v",k2="v2"` (values may hold escaped quotes, backslashes and commas).
fn labels(mut rest: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        out.insert(key.trim_start_matches(',').to_string(), value);
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP trustmsg_x a counter\n\
        # TYPE trustmsg_x counter\n\
        trustmsg_x{code=\"a\",topic=\"t,\\\"q\\\"\"} 3\n\
        trustmsg_x{code=\"b\"} 4\n\
        trustmsg_x_total 9\n\
        trustmsg_gauge 1.5\n";

    #[test]
    fn a_sample_is_found_by_name_and_labels_and_never_by_a_longer_name() {
        let m = Metrics::parse(TEXT);
        assert_eq!(m.value("trustmsg_x", &[("code", "b")]), Some(4.0));
        assert_eq!(
            m.value("trustmsg_x", &[("code", "a"), ("topic", "t,\"q\"")]),
            Some(3.0)
        );
        assert_eq!(m.value("trustmsg_x", &[("code", "c")]), None);
        assert_eq!(m.sum("trustmsg_x"), 7.0);
        assert_eq!(m.value("trustmsg_gauge", &[]), Some(1.5));
        assert_eq!(m.value("trustmsg_gau", &[]), None);
    }

    #[test]
    #[should_panic(expected = "names several samples")]
    fn labels_that_name_several_samples_fail() {
        Metrics::parse(TEXT).value("trustmsg_x", &[]);
    }
}
