//! Sends a pprof profile to a Pyroscope-compatible collector: `POST <url>/ingest` with
//! the profile as the `profile` part of a `multipart/form-data` body (what Pyroscope's
//! own clients send) and the series name, time range and sample rate as query
//! parameters.
//!
//! Parca's ingest is gRPC (`parca.profilestore.v1alpha1.ProfileStoreService`); no
//! well-kept Rust client of it exists, so it is not offered: a Parca agent can scrape
//! or relay instead.

use std::fmt::Write as _;
use std::time::Duration;

/// What a push needs besides the profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushTarget {
    /// The collector's base address (`http://host:4040`); `/ingest` is appended.
    pub url: String,
    /// The series name (`app.cpu{label=value}`).
    pub application: String,
    /// Unix seconds the profile starts and ends at.
    pub from: u64,
    pub until: u64,
    /// The sampling rate in Hz, when the profile was sampled at one.
    pub sample_rate: Option<u64>,
    /// How long to wait for the collector.
    pub timeout: Duration,
}

impl Default for PushTarget {
    fn default() -> Self {
        PushTarget {
            url: String::new(),
            application: "rvperf.cpu".to_owned(),
            from: 0,
            until: 0,
            sample_rate: None,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    #[error("{url}: only http:// collectors are supported (TLS is not built in)")]
    UnsupportedScheme { url: String },
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
    #[error("{url}: the collector answered {status}: {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
}

/// The boundary of the multipart body: no byte sequence a gzip stream could hold is
/// excluded, so the boundary is long and fixed, and checked against the profile.
const BOUNDARY_BASE: &str = "rvperf-pprof-boundary-7d1c0f3a9b2e4c58";

/// The address the profile is posted to, with its query.
pub fn ingest_url(target: &PushTarget) -> Result<String, PushError> {
    if !target.url.starts_with("http://") {
        return Err(PushError::UnsupportedScheme {
            url: target.url.clone(),
        });
    }
    let mut url = target.url.trim_end_matches('/').to_owned();
    url.push_str("/ingest?name=");
    percent_encode(&target.application, &mut url);
    let _ = write!(
        url,
        "&from={}&until={}&format=pprof&spyName=rvperf",
        target.from, target.until
    );
    if let Some(rate) = target.sample_rate {
        let _ = write!(url, "&sampleRate={rate}");
    }
    Ok(url)
}

/// `text` as a query parameter value (RFC 3986 unreserved characters kept).
fn percent_encode(text: &str, out: &mut String) {
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
}

/// The `multipart/form-data` body holding `profile` (a `.pb.gz`) as the `profile`
/// part, and its content type.
pub fn multipart_body(profile: &[u8]) -> (String, Vec<u8>) {
    // A boundary must not occur in the data: lengthen it until it does not.
    let mut boundary = BOUNDARY_BASE.to_owned();
    while contains(profile, boundary.as_bytes()) {
        boundary.push('x');
    }
    let mut body = Vec::with_capacity(profile.len() + 256);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(profile);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Posts `profile` (the bytes of a `.pb.gz`) to the collector; the collector's answer
/// body on success.
pub fn push_pyroscope(target: &PushTarget, profile: &[u8]) -> Result<String, PushError> {
    let url = ingest_url(target)?;
    let (content_type, body) = multipart_body(profile);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(target.timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let transport = |error: ureq::Error| PushError::Transport {
        url: url.clone(),
        message: error.to_string(),
    };
    let mut response = agent
        .post(&url)
        .header("Content-Type", &content_type)
        .send(&body[..])
        .map_err(transport)?;
    let status = response.status().as_u16();
    let answer = response.body_mut().read_to_string().unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(PushError::Refused {
            url,
            status,
            body: answer
                .chars()
                .take(200)
                .collect::<String>()
                .replace('\n', " "),
        });
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_the_series_and_range() {
        let target = PushTarget {
            url: "http://127.0.0.1:4040/".into(),
            application: "hot.cpu{host=a b}".into(),
            from: 10,
            until: 20,
            sample_rate: Some(99),
            ..PushTarget::default()
        };
        assert_eq!(
            ingest_url(&target).unwrap(),
            "http://127.0.0.1:4040/ingest?name=hot.cpu%7Bhost%3Da%20b%7D&from=10&until=20&format=pprof&spyName=rvperf&sampleRate=99"
        );
        let https = PushTarget {
            url: "https://collector".into(),
            ..PushTarget::default()
        };
        assert!(matches!(
            ingest_url(&https),
            Err(PushError::UnsupportedScheme { .. })
        ));
    }

    #[test]
    fn the_boundary_never_occurs_in_the_profile() {
        let mut profile = b"abc".to_vec();
        profile.extend_from_slice(format!("--{BOUNDARY_BASE}").as_bytes());
        let (content_type, body) = multipart_body(&profile);
        let boundary = content_type.split("boundary=").nth(1).unwrap();
        assert_eq!(boundary, format!("{BOUNDARY_BASE}x"));
        let text = String::from_utf8_lossy(&body);
        assert_eq!(text.matches(&format!("--{boundary}")).count(), 2);
    }
}
