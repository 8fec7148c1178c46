//! Kafka record headers, byte for byte. Kafka's protocol carries a header's name as bytes (the Java
//! client sends UTF-8; C and Go producers can send anything), and librdkafka keeps it with its length,
//! but hands it out as a C string: rdkafka's accessor takes it as `&str` and panics on a name that is
//! not UTF-8, and any C-string accessor cuts a name at its first NUL. So names are read and written
//! here through librdkafka's own functions, the name's length read from librdkafka's header record
//! (`rd_kafka_header_t`, rdkafka_header.h of the librdkafka that rdkafka-sys bundles, as pinned by
//! Cargo.lock: only when that version is the one linked) and checked against what its public accessor
//! says of the same header.

use std::ffi::c_void;
use std::os::raw::c_char;

use rdkafka::bindings as rd;
use rdkafka::message::{BorrowedHeaders, OwnedHeaders};

use crate::archive::record::Header;

/// The librdkafka whose header layout `RawHeader` is (rdkafka-sys 4.10.0 bundles 2.12.1). With another
/// one, names are read as C strings (cut at a NUL) rather than read from a layout that may differ.
const LAYOUT_VERSION: &str = "2.12.1";

static KNOWN_LAYOUT: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| rdkafka::util::get_rdkafka_version().1 == LAYOUT_VERSION);

/// librdkafka's record of one header: `rd_kafka_header_get_all` returns a pointer to its `name`.
#[repr(C)]
struct RawHeader {
    ser_size: usize,
    value_size: usize,
    name_size: usize,
    value: *const c_char,
    name: [c_char; 1],
}

/// Headers that librdkafka holds (a consumed message's, or ones built to produce).
pub trait NativeHeaders {
    fn native(&self) -> &BorrowedHeaders;
}

impl NativeHeaders for BorrowedHeaders {
    fn native(&self) -> &BorrowedHeaders {
        self
    }
}

impl NativeHeaders for OwnedHeaders {
    fn native(&self) -> &BorrowedHeaders {
        self.as_borrowed()
    }
}

/// rdkafka's `BorrowedHeaders` is a reference to librdkafka's headers themselves.
fn raw(headers: &BorrowedHeaders) -> *mut rd::rd_kafka_headers_t {
    headers as *const BorrowedHeaders as *mut rd::rd_kafka_headers_t
}

/// Every header, in order, its name and value exactly as the producer sent them.
pub fn read(headers: &impl NativeHeaders) -> Vec<Header> {
    let hs = raw(headers.native());
    // SAFETY: `hs` is a live headers list owned by `headers`, which outlives this function; every
    // pointer librdkafka returns points into it; names and values are copied before returning.
    unsafe {
        let count = rd::rd_kafka_header_cnt(hs);
        let mut out = Vec::with_capacity(count);
        for idx in 0..count {
            let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0);
            if rd::rd_kafka_header_get_all(hs, idx, &mut name, &mut value, &mut size)
                != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            {
                break;
            }
            let key = name_bytes(name, value.cast(), size).to_vec();
            let value = (!value.is_null()).then(|| std::slice::from_raw_parts(value.cast::<u8>(), size).to_vec());
            out.push(Header { key, value });
        }
        out
    }
}

/// A header's name whole, from the pointer `rd_kafka_header_get_all` gave for it: its length is in
/// librdkafka's record, found from the name's place in it. The record must agree with what the
/// accessor said of the value (the same pointer and length, the value stored right after the name and
/// its NUL), and be at least as long as the C string: otherwise (another librdkafka layout) the name is
/// taken up to its first NUL, as a C string.
///
/// # Safety
/// `name`, `value` and `value_size` are what `rd_kafka_header_get_all` returned for one header, and
/// the headers outlive the returned slice.
unsafe fn name_bytes<'a>(name: *const c_char, value: *const c_char, value_size: usize) -> &'a [u8] {
    let c_string = std::ffi::CStr::from_ptr(name).to_bytes();
    if !*KNOWN_LAYOUT {
        return c_string;
    }
    let record = name.byte_sub(std::mem::offset_of!(RawHeader, name)).cast::<RawHeader>();
    let (size, stored_value, stored_size) = ((*record).name_size, (*record).value, (*record).value_size);
    let agrees = stored_value == value
        && stored_size == value_size
        && (value.is_null() || value == name.wrapping_add(size.wrapping_add(1)))
        && !(value.is_null() && value_size != 0);
    if agrees && size >= c_string.len() {
        std::slice::from_raw_parts(name.cast::<u8>(), size)
    } else {
        c_string
    }
}

/// `headers` to produce, names and values byte for byte.
pub fn owned(headers: &[Header]) -> OwnedHeaders {
    let out = OwnedHeaders::new_with_capacity(headers.len());
    let hs = raw(out.native());
    for h in headers {
        // An empty value is not a null one: it needs a pointer, and a valid one (C's memcpy wants it).
        static EMPTY: [u8; 1] = [0];
        let (value, value_len) = match &h.value {
            Some(v) if v.is_empty() => (EMPTY.as_ptr().cast::<c_void>(), 0),
            Some(v) => (v.as_ptr().cast::<c_void>(), v.len() as isize),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `hs` is the headers list `out` owns; librdkafka copies the name and value.
        let err = unsafe { rd::rd_kafka_header_add(hs, h.key.as_ptr().cast(), h.key.len() as isize, value, value_len) };
        // Adding to headers built here cannot fail (librdkafka refuses only read-only headers).
        debug_assert_eq!(err, rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(key: &[u8], value: Option<&[u8]>) -> Header {
        Header { key: key.to_vec(), value: value.map(<[u8]>::to_vec) }
    }

    #[test]
    fn names_that_are_not_utf8_or_hold_a_nul_round_trip_whole() {
        let headers = vec![
            header(b"\xff\xfe-not-utf8", Some(b"v")),
            header(b"nul\x00inside", Some(b"\x00\xff")),
            header(b"nul\x00with-null-value", None),
            header(b"", Some(b"")),
            header(b"plain", None),
            header(b"plain", Some(b"again")),
        ];
        assert_eq!(read(&owned(&headers)), headers);
    }

    #[test]
    fn the_librdkafka_linked_is_the_one_whose_header_layout_is_known() {
        assert!(*KNOWN_LAYOUT, "librdkafka {} is linked", rdkafka::util::get_rdkafka_version().1);
    }

    #[test]
    fn rdkafkas_own_headers_read_the_same() {
        let built = OwnedHeaders::new()
            .insert(rdkafka::message::Header { key: "trace", value: Some(b"abc".as_slice()) })
            .insert(rdkafka::message::Header::<&[u8]> { key: "none", value: None });
        assert_eq!(read(&built), vec![header(b"trace", Some(b"abc")), header(b"none", None)]);
    }
}
