//! The SSRF guard admits only https URLs without credentials, and only addresses the address
//! rules admit, whatever the URL and whatever the name lookup answers.

#![no_main]

use std::io;
use std::net::{IpAddr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use safe_lanes::Code;
use safe_lanes::fetch::{FetchPolicy, Fetcher, Lookup, address_refusal};

/// Answers every name with the addresses the input chose.
#[derive(Debug)]
struct Answers(Vec<IpAddr>);

impl Lookup for Answers {
    fn lookup(&self, _host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        Ok(self.0.clone())
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte says how many 16-byte addresses follow (0-3); an IPv4-mapped one stands
    // for an IPv4 answer. The rest is the URL.
    let count = usize::from(data.first().copied().unwrap_or(0) % 4);
    let rest = data.get(1..).unwrap_or_default();
    if rest.len() < count * 16 {
        return;
    }
    let (addresses, url) = rest.split_at(count * 16);
    let answers: Vec<IpAddr> = addresses
        .chunks_exact(16)
        .map(|chunk| {
            let bytes: [u8; 16] = chunk.try_into().unwrap();
            let v6 = Ipv6Addr::from(bytes);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        })
        .collect();
    let Ok(url) = std::str::from_utf8(url) else {
        return;
    };
    let fetcher = Fetcher::new(FetchPolicy::default())
        .unwrap()
        .with_lookup(Answers(answers));
    match fetcher.guard().admit(url) {
        Ok(admitted) => {
            assert!(!admitted.is_empty());
            for addr in admitted {
                assert_eq!(address_refusal(addr.ip()), None, "{url} admitted {addr}");
            }
            let lower = url.to_ascii_lowercase();
            assert!(lower.starts_with("https://"), "{url}");
            let authority = lower["https://".len()..]
                .split(['/', '?', '#'])
                .next()
                .unwrap_or_default();
            assert!(!authority.contains('@'), "{url}");
        }
        Err(e) => assert!(
            matches!(
                e.code(),
                Code::AddressRefused | Code::InvalidArgument | Code::FetchFailed
            ),
            "{url}: {e}"
        ),
    }
});
