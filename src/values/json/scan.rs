//! JSON text read a token at a time, for the schema-directed decoder (`decode`): whitespace, strings
//! (escapes undone, UTF-8 checked), numbers (their text, held to JSON's grammar), literals, and whole
//! values skipped. Everything outside strings is checked byte by byte, so a document read to its end
//! is valid JSON (and valid UTF-8) throughout.

use std::fmt;

/// How many arrays and objects may nest, one in another (serde_json's limit too).
const MAX_DEPTH: usize = 127;

/// Where JSON text stops being JSON, and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Syntax {
    at: usize,
    why: &'static str,
}

impl fmt::Display for Syntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.why, self.at)
    }
}

/// A number's text, and whether it is an integer (no fraction, no exponent).
pub(super) struct Number<'a> {
    pub text: &'a str,
    pub integer: bool,
}

/// The reader: the text and how far it has been read.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    pub fn position(&self) -> usize {
        self.at
    }

    /// Goes back to `at` (a position read before).
    pub fn rewind(&mut self, at: usize) {
        self.at = at;
    }

    /// The text from `start` to here (whole values read: UTF-8), for messages.
    pub fn text_since(&self, start: usize) -> String {
        String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned()
    }

    fn error(&self, why: &'static str) -> Syntax {
        Syntax { at: self.at, why }
    }

    /// The next byte after whitespace, not taken.
    #[inline]
    pub fn peek(&mut self) -> Result<u8, Syntax> {
        while let Some(&b) = self.bytes.get(self.at) {
            match b {
                b' ' | b'\n' | b'\r' | b'\t' => self.at += 1,
                _ => return Ok(b),
            }
        }
        Err(self.error("the text ends early"))
    }

    /// Takes `b` if it comes next (after whitespace).
    #[inline]
    pub fn eat(&mut self, b: u8) -> Result<bool, Syntax> {
        let next = self.peek()? == b;
        self.at += usize::from(next);
        Ok(next)
    }

    /// Takes `b`, which must come next.
    #[inline]
    pub fn expect(&mut self, b: u8, why: &'static str) -> Result<(), Syntax> {
        match self.eat(b)? {
            true => Ok(()),
            false => Err(self.error(why)),
        }
    }

    /// Whether another item of an array or entry of an object comes before its `close` (which is taken
    /// when it comes instead); `started`: whether one was read already (then a `,` comes between).
    #[inline]
    pub fn another(&mut self, close: u8, started: &mut bool) -> Result<bool, Syntax> {
        match std::mem::replace(started, true) {
            false => Ok(!self.eat(close)?),
            true => self.more(close),
        }
    }

    /// After an array's item or an object's entry: whether another follows (`,`) or the container
    /// ends (`close`).
    #[inline]
    fn more(&mut self, close: u8) -> Result<bool, Syntax> {
        match self.peek()? {
            b',' => {
                self.at += 1;
                Ok(true)
            }
            b if b == close => {
                self.at += 1;
                Ok(false)
            }
            _ => Err(self.error(if close == b']' { "expected , or ]" } else { "expected , or }" })),
        }
    }

    /// Nothing but whitespace is left.
    pub fn end(&mut self) -> Result<(), Syntax> {
        match self.peek() {
            Err(_) => Ok(()),
            Ok(_) => Err(self.error("trailing characters")),
        }
    }

    /// Takes `word` (`true`, `false`, `null`), which must come next.
    pub fn literal(&mut self, word: &'static [u8]) -> Result<(), Syntax> {
        self.peek()?;
        match self.bytes[self.at..].starts_with(word) {
            true => {
                self.at += word.len();
                Ok(())
            }
            false => Err(self.error("expected a value")),
        }
    }

    /// Takes a number, which must come next.
    pub fn number(&mut self) -> Result<Number<'a>, Syntax> {
        self.peek()?;
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while r.bytes.get(r.at).is_some_and(u8::is_ascii_digit) {
                r.at += 1;
            }
            r.at > from
        };
        self.at += usize::from(self.bytes[self.at] == b'-');
        match self.bytes.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.error("expected a value")),
        }
        let mut integer = true;
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            integer = false;
            if !digits(self) {
                return Err(self.error("expected a digit after the point"));
            }
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            integer = false;
            self.at += usize::from(matches!(self.bytes.get(self.at), Some(b'+' | b'-')));
            if !digits(self) {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).expect("a number's text is ASCII");
        // Past a double's range is not JSON to serde_json either (an integer is within it up to 309 digits).
        if (!integer || text.len() > 300) && !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(Syntax { at: start, why: "a number out of a double's range" });
        }
        Ok(Number { text, integer })
    }

    /// Takes a string, which must come next: its bytes, borrowed from the JSON when it has no escapes,
    /// else undone into `scratch`; not checked to be UTF-8 (see [`string`](Self::string)).
    #[inline]
    pub fn raw_string<'s>(&mut self, scratch: &'s mut Vec<u8>) -> Result<&'s [u8], Syntax>
    where
        'a: 's,
    {
        self.expect(b'"', "expected a string")?;
        let start = self.at;
        self.at = special(self.bytes, self.at);
        match self.bytes.get(self.at) {
            Some(b'"') => {
                self.at += 1;
                Ok(&self.bytes[start..self.at - 1])
            }
            Some(b'\\') => {
                scratch.clear();
                scratch.extend_from_slice(&self.bytes[start..self.at]);
                self.escaped(scratch)?;
                Ok(scratch)
            }
            Some(_) => Err(self.error("a control character in a string")),
            None => Err(self.error("the text ends in a string")),
        }
    }

    /// Takes a string, which must come next, as text (checked to be UTF-8).
    pub fn string<'s>(&mut self, scratch: &'s mut Vec<u8>) -> Result<&'s str, Syntax>
    where
        'a: 's,
    {
        let quote = self.peek().map_or(self.at, |_| self.at);
        let bytes = self.raw_string(scratch)?;
        // Escapes always shorten a string: one as long as its text has none, and its bytes are the text's.
        let plain = bytes.len() == self.at - quote - 2;
        std::str::from_utf8(bytes).map_err(|e| Syntax {
            at: quote + 1 + if plain { e.valid_up_to() } else { 0 },
            why: if plain { "invalid UTF-8" } else { "invalid UTF-8 in the string" },
        })
    }

    /// The rest of a string after its first escape, undone into `out`; its closing quote taken.
    fn escaped(&mut self, out: &mut Vec<u8>) -> Result<(), Syntax> {
        loop {
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.at += 1;
                    let undone = match self.bytes.get(self.at) {
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'/') => b'/',
                        Some(b'b') => 8,
                        Some(b'f') => 12,
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        Some(b'u') => {
                            self.at += 1;
                            let c = self.unicode()?;
                            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                            continue;
                        }
                        _ => return Err(self.error("an invalid escape")),
                    };
                    out.push(undone);
                    self.at += 1;
                }
                Some(_) => {
                    let end = special(self.bytes, self.at);
                    out.extend_from_slice(&self.bytes[self.at..end]);
                    self.at = end;
                    if !matches!(self.bytes.get(end), Some(b'"' | b'\\')) {
                        return Err(self.error("a control character or the end in a string"));
                    }
                }
                None => return Err(self.error("the text ends in a string")),
            }
        }
    }

    /// The character of a `\u` escape (its `XXXX` next), with a low surrogate's escape after a high one.
    fn unicode(&mut self) -> Result<char, Syntax> {
        let high = self.hex4()?;
        let code = match high {
            0xD800..=0xDBFF => {
                if !self.bytes[self.at..].starts_with(b"\\u") {
                    return Err(self.error("a lone surrogate"));
                }
                self.at += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.error("a lone surrogate"));
                }
                0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
            }
            code => code,
        };
        char::from_u32(code).ok_or_else(|| self.error("a lone surrogate"))
    }

    fn hex4(&mut self) -> Result<u32, Syntax> {
        let digits = self.bytes.get(self.at..self.at + 4).ok_or_else(|| self.error("a short \\u escape"))?;
        let text = std::str::from_utf8(digits).ok().filter(|t| t.bytes().all(|b| b.is_ascii_hexdigit()));
        let code =
            text.and_then(|t| u32::from_str_radix(t, 16).ok()).ok_or_else(|| self.error("an invalid \\u escape"))?;
        self.at += 4;
        Ok(code)
    }

    /// Refuses to open an array or object within `depth` others, past the limit.
    pub fn within(&self, depth: usize) -> Result<(), Syntax> {
        match depth >= MAX_DEPTH {
            true => Err(self.error("nested too deeply")),
            false => Ok(()),
        }
    }

    /// Takes a whole value, whatever it is, found within `depth` arrays and objects.
    pub fn skip(&mut self, scratch: &mut Vec<u8>, depth: usize) -> Result<(), Syntax> {
        match self.peek()? {
            b'{' => {
                self.within(depth)?;
                self.at += 1;
                let mut started = false;
                while self.another(b'}', &mut started)? {
                    self.string(scratch)?;
                    self.expect(b':', "expected :")?;
                    self.skip(scratch, depth + 1)?;
                }
            }
            b'[' => {
                self.within(depth)?;
                self.at += 1;
                let mut started = false;
                while self.another(b']', &mut started)? {
                    self.skip(scratch, depth + 1)?;
                }
            }
            b'"' => {
                self.string(scratch)?;
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            _ => {
                self.number()?;
            }
        }
        Ok(())
    }
}

/// Where the first byte at or after `from` is that ends a string's plain run: a quote, a backslash or
/// a control character (below 0x20); the text's length if none. Eight bytes at a time in a word for
/// the first 32 (most strings, keys above all, are short), then thirty-two at a time, each run tested
/// without branches (which the compiler turns into vector compares), the last few bytes one by one.
#[inline]
fn special(bytes: &[u8], from: usize) -> usize {
    const WORDS: usize = 32;
    const RUN: usize = 32;
    let ends = |b: u8| (b == b'"') | (b == b'\\') | (b < 0x20);
    let mut at = from;
    while let Some(word) = bytes.get(at..at + 8) {
        let found = word_ends(u64::from_le_bytes(word.try_into().expect("eight bytes")));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
        if at - from >= WORDS {
            let (runs, _) = bytes[at..].as_chunks::<RUN>();
            for run in runs {
                if run.iter().fold(false, |found, &b| found | ends(b)) {
                    break;
                }
                at += RUN;
            }
            break;
        }
    }
    at + bytes[at..].iter().position(|&b| ends(b)).unwrap_or(bytes.len() - at)
}

/// A word of eight bytes (the first in its low byte) with the high bit set in the lowest byte that
/// ends a plain run, if any (bits above it may be set too: borrows run upwards only, so only the
/// lowest is to be read).
#[inline]
fn word_ends(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGH;
    below(w ^ (ONES * u64::from(b'"')), 1) | below(w ^ (ONES * u64::from(b'\\')), 1) | below(w, 0x20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(text: &str) -> Result<(), Syntax> {
        let mut r = Reader::new(text.as_bytes());
        r.skip(&mut Vec::new(), 0)?;
        r.end()
    }

    #[test]
    fn what_json_allows_is_read_and_nothing_else() {
        for ok in [
            "0",
            "-0",
            "1.5e-3",
            "-12E+4",
            "true",
            "null",
            " [ ] ",
            "{}",
            r#"{"a":[1,{"b":null}],"c":"\u00e9\ud83d\ude00"}"#,
            "\"é\"",
            "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
        ] {
            assert_eq!(valid(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "tru",
            "nul",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{a:1}",
            "{\"a\":1,}",
            "\"x",
            "\"\\x\"",
            "1e400",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\u12\"",
            "\"a\tb\"",
            "1 2",
            "[",
            "{\"a\":1",
        ] {
            assert!(valid(bad).is_err(), "{bad:?} is not JSON");
        }
        assert_eq!(valid(&"[".repeat(200)).unwrap_err().why, "nested too deeply");
        // serde_json's limit: 127 arrays one in another, not 128.
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(
            (valid(&nested(127)), serde_json::from_str::<serde_json::Value>(&nested(127)).is_ok()),
            (Ok(()), true)
        );
        assert!(valid(&nested(128)).is_err() && serde_json::from_str::<serde_json::Value>(&nested(128)).is_err());
        let not_utf8 = [b'"', 0xff, b'"'];
        let mut r = Reader::new(&not_utf8);
        assert_eq!(r.string(&mut Vec::new()).unwrap_err(), Syntax { at: 1, why: "invalid UTF-8" });
        // After an escape the bytes are not the text's: the string is named by where it starts.
        let escaped = [b' ', b'"', b'\\', b'n', 0xff, b'"'];
        let why = Reader::new(&escaped).string(&mut Vec::new()).unwrap_err();
        assert_eq!(why, Syntax { at: 2, why: "invalid UTF-8 in the string" });
    }

    #[test]
    fn strings_are_undone_and_found_at_any_alignment() {
        let mut scratch = Vec::new();
        for pad in 0..80 {
            let plain = format!("\"{}\"", "x".repeat(pad));
            assert_eq!(Reader::new(plain.as_bytes()).string(&mut scratch).unwrap(), "x".repeat(pad));
            let wide = format!("\"{}é€\" ", "é".repeat(pad));
            assert_eq!(Reader::new(wide.as_bytes()).string(&mut scratch).unwrap(), &wide[1..wide.len() - 2]);
            let escaped = format!("\"{}\\n{}\\u00e9\"", "y".repeat(pad), "z".repeat(pad));
            let expected = format!("{}\n{}é", "y".repeat(pad), "z".repeat(pad));
            assert_eq!(Reader::new(escaped.as_bytes()).string(&mut scratch).unwrap(), expected);
            let control = format!("\"{}\u{1}\"", "x".repeat(pad));
            assert!(Reader::new(control.as_bytes()).string(&mut scratch).is_err(), "{pad}");
        }
    }

    #[test]
    fn numbers_give_their_text_and_whether_they_are_integers() {
        for (text, integer) in [("12", true), ("-0", true), ("1.0", false), ("2e3", false)] {
            let n = Reader::new(text.as_bytes()).number().unwrap();
            assert_eq!((n.text, n.integer), (text, integer));
        }
    }
}
