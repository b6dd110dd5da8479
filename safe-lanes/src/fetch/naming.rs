//! The name a fetched file is saved under, before the lane's `sanitize`.
//!
//! In order: the caller's hint; the `Content-Disposition` header's `filename*` (RFC 8187:
//! `UTF-8''%e2%82%ac%20rates.pdf`), then its `filename`; the last segment of the final URL's
//! path, percent-decoded; else `download`. Whatever is chosen is only ever a hint: the lane
//! reduces it to one safe base name, so `../../.bashrc` or a right-to-left override from a
//! server is harmless.

/// The name when nothing suggests one.
pub(crate) const FALLBACK: &str = "download";

/// The hint for a file fetched from a URL whose path is `path`, with this
/// `Content-Disposition` header (raw bytes), when the caller gave none.
pub(crate) fn suggested(disposition: Option<&[u8]>, path: &str) -> Vec<u8> {
    disposition
        .and_then(from_disposition)
        .or_else(|| from_path(path))
        .unwrap_or_else(|| FALLBACK.as_bytes().to_vec())
}

/// The file name a `Content-Disposition` value gives: `filename*` first, then `filename`.
fn from_disposition(value: &[u8]) -> Option<Vec<u8>> {
    let params = parameters(value);
    let find = |wanted: &str| {
        params
            .iter()
            .find(|(name, value)| name.eq_ignore_ascii_case(wanted.as_bytes()) && !value.is_empty())
            .map(|(_, value)| value.clone())
    };
    find("filename*")
        .and_then(|ext| extended(&ext))
        .filter(|name| !name.is_empty())
        .or_else(|| find("filename"))
}

/// The `name=value` parameters after the disposition type, values unquoted.
fn parameters(value: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = value;
    // The disposition type (`attachment`, `inline`) comes first.
    match rest.iter().position(|&b| b == b';') {
        Some(at) => rest = &rest[at + 1..],
        None => return out,
    }
    loop {
        rest = trim_start(rest);
        if rest.is_empty() {
            return out;
        }
        let end = rest
            .iter()
            .position(|&b| b == b'=' || b == b';')
            .unwrap_or(rest.len());
        let name = trim_end(&rest[..end]).to_vec();
        rest = &rest[end..];
        if rest.first() != Some(&b'=') {
            // A parameter without a value: skip it.
            rest = rest.get(1..).unwrap_or_default();
            continue;
        }
        rest = trim_start(&rest[1..]);
        let value = if rest.first() == Some(&b'"') {
            let (value, after) = quoted(&rest[1..]);
            rest = after;
            // Anything up to the next `;` after the closing quote is ignored.
            let next = rest.iter().position(|&b| b == b';').unwrap_or(rest.len());
            rest = &rest[next..];
            value
        } else {
            let end = rest.iter().position(|&b| b == b';').unwrap_or(rest.len());
            let value = trim_end(&rest[..end]).to_vec();
            rest = &rest[end..];
            value
        };
        out.push((name, value));
        rest = rest.get(1..).unwrap_or_default();
    }
}

/// A quoted string's content (backslash escapes undone) and what follows its closing quote.
fn quoted(mut rest: &[u8]) -> (Vec<u8>, &[u8]) {
    let mut value = Vec::new();
    while let Some((&b, after)) = rest.split_first() {
        rest = after;
        match b {
            b'"' => return (value, rest),
            b'\\' => {
                if let Some((&escaped, after)) = rest.split_first() {
                    value.push(escaped);
                    rest = after;
                }
            }
            _ => value.push(b),
        }
    }
    (value, rest)
}

/// An RFC 8187 extended value, `charset'language'percent-encoded`, decoded to UTF-8 bytes
/// (ISO-8859-1 mapped to its code points; any other charset taken as UTF-8, which the lane
/// decodes lossily). `None` when it is not one.
fn extended(value: &[u8]) -> Option<Vec<u8>> {
    let mut parts = value.splitn(3, |&b| b == b'\'');
    let charset = parts.next()?;
    let _language = parts.next()?;
    let encoded = parts.next()?;
    let bytes = percent_decoded(encoded);
    if charset.eq_ignore_ascii_case(b"iso-8859-1") {
        let text: String = bytes.iter().map(|&b| char::from(b)).collect();
        return Some(text.into_bytes());
    }
    Some(bytes)
}

/// The last non-empty segment of a URL path, percent-decoded.
fn from_path(path: &str) -> Option<Vec<u8>> {
    let segment = path.rsplit('/').find(|s| !s.is_empty())?;
    let decoded = percent_decoded(segment.as_bytes());
    (!decoded.is_empty()).then_some(decoded)
}

/// `%XX` escapes decoded; anything else, a malformed escape included, kept as it is.
fn percent_decoded(raw: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                raw.get(i + 1).copied().and_then(hex),
                raw.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

fn trim_start(mut b: &[u8]) -> &[u8] {
    while let Some((first, rest)) = b.split_first() {
        if !first.is_ascii_whitespace() {
            break;
        }
        b = rest;
    }
    b
}

fn trim_end(mut b: &[u8]) -> &[u8] {
    while let Some((last, rest)) = b.split_last() {
        if !last.is_ascii_whitespace() {
            break;
        }
        b = rest;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Content-Disposition` value (if any), a URL path, the hint expected.
    type Case<'a> = (Option<&'a [u8]>, &'a str, &'a [u8]);

    #[test]
    fn names_come_from_the_header_then_the_path_then_the_fallback() {
        let cases: &[Case<'_>] = &[
            (Some(b"attachment; filename=\"a b.pdf\""), "/x", b"a b.pdf"),
            (Some(b"attachment; filename=plain.txt"), "/x", b"plain.txt"),
            (
                Some(b"attachment; filename=\"fallback.txt\"; filename*=UTF-8''%e2%82%ac%20rates.pdf"),
                "/x",
                "€ rates.pdf".as_bytes(),
            ),
            (
                Some(b"attachment; filename*=iso-8859-1'en'%E9t%E9.txt"),
                "/x",
                "été.txt".as_bytes(),
            ),
            (Some(b"attachment; FILENAME=\"q\\\"uote.txt\""), "/x", b"q\"uote.txt"),
            (Some(b"attachment; filename=\"semi;colon.txt\""), "/x", b"semi;colon.txt"),
            (Some(b"attachment; filename*=broken"), "/x", b"x"),
            (Some(b"attachment; filename=\"\""), "/dir/file%20name.zip", b"file name.zip"),
            (Some(b"inline"), "/dir/", b"dir"),
            (None, "/a/b/report.pdf", b"report.pdf"),
            (None, "/", b"download"),
            (None, "", b"download"),
            (None, "/%zz", b"%zz"),
        ];
        for (disposition, path, want) in cases {
            assert_eq!(
                suggested(*disposition, path),
                want.to_vec(),
                "{disposition:?} {path}"
            );
        }
    }
}
