//! One element on the wire: `"0x…"` raw bits, or null for an element nobody wrote.
//!
//! A large case moves millions of elements through the protocol (the request's inputs, the
//! answer's outputs and variants). Held as `Option<String>`, each element was a heap string
//! of its own, made and freed on every hop. [`Bits`] keeps the canonical spelling uopkit
//! itself writes (`{:#x}`: lowercase, no leading zeros) as the number, with no allocation;
//! anything else a backend sends is kept as written, so [`super::parse_bits`] judges it and
//! names it exactly as before. The JSON is unchanged either way.

use std::borrow::Cow;
use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Raw bits as `"0x…"`, or null for an uninitialized element.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Bits {
    /// `null`: the element was not written.
    #[default]
    Null,
    /// A string in uopkit's canonical spelling, `format!("{v:#x}")`.
    Hex(u64),
    /// Any other string, as written (it may still be a valid `"0X…"` or `"0x00…"` spelling).
    Text(String),
}

impl Bits {
    /// The element `v` (or null).
    pub fn of(v: Option<u64>) -> Bits {
        v.map_or(Bits::Null, Bits::Hex)
    }

    /// The string as sent, or `None` for null.
    pub fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            Bits::Null => None,
            Bits::Hex(v) => Some(Cow::Owned(format!("{v:#x}"))),
            Bits::Text(s) => Some(Cow::Borrowed(s)),
        }
    }

    fn from_str(s: &str) -> Bits {
        canonical(s).map_or_else(|| Bits::Text(s.to_string()), Bits::Hex)
    }
}

/// `v` if `s` is exactly `format!("{v:#x}")`.
fn canonical(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x")?;
    let ok = !digits.is_empty()
        && digits.len() <= 16
        && (digits == "0" || !digits.starts_with('0'))
        && digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !ok {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

impl Serialize for Bits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Bits::Null => s.serialize_none(),
            // Formatted straight into the output (serde_json writes `collect_str` without a
            // String of its own).
            Bits::Hex(v) => s.collect_str(&format_args!("{v:#x}")),
            Bits::Text(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for Bits {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bits, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Bits;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a hex string \"0x…\" or null")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Bits, E> {
                Ok(Bits::from_str(s))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Bits, E> {
                Ok(canonical(&s).map_or(Bits::Text(s), Bits::Hex))
            }
            fn visit_none<E: de::Error>(self) -> Result<Bits, E> {
                Ok(Bits::Null)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Bits, E> {
                Ok(Bits::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Bits, D::Error> {
                d.deserialize_str(V)
            }
        }
        d.deserialize_option(V)
    }
}

impl JsonSchema for Bits {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        <Option<String> as JsonSchema>::schema_name()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Option<String> as JsonSchema>::json_schema(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(json: &str) -> (Bits, String) {
        let b: Bits = serde_json::from_str(json).unwrap();
        let back = serde_json::to_string(&b).unwrap();
        (b, back)
    }

    #[test]
    fn canonical_strings_are_numbers_and_the_json_is_unchanged() {
        for (json, v) in [
            ("\"0x0\"", 0u64),
            ("\"0x3f800000\"", 0x3f80_0000),
            ("\"0xffffffffffffffff\"", u64::MAX),
            ("\"0x1\"", 1),
        ] {
            let (b, back) = round(json);
            assert_eq!(b, Bits::Hex(v), "{json}");
            assert_eq!(back, json);
            assert_eq!(format!("{v:#x}"), json.trim_matches('"'));
        }
        assert_eq!(round("null"), (Bits::Null, "null".to_string()));
    }

    #[test]
    fn other_spellings_are_kept_as_written() {
        for json in [
            "\"0X3F\"",
            "\"0x03f\"",
            "\"0x3F\"",
            "\"0x\"",
            "\"3f\"",
            "\"0x+1\"",
            "\"0x10000000000000000\"",
            "\"\"",
        ] {
            let (b, back) = round(json);
            assert_eq!(b, Bits::Text(json.trim_matches('"').to_string()), "{json}");
            assert_eq!(back, json);
        }
    }

    #[test]
    fn a_number_is_not_bits() {
        assert!(serde_json::from_str::<Bits>("7").is_err());
        assert!(serde_json::from_str::<Vec<Bits>>("[\"0x1\", null, 2]").is_err());
    }

    #[test]
    fn inside_an_internally_tagged_message_too() {
        // Answers are `#[serde(tag = "type")]`: serde buffers the content first.
        let a: super::super::Answer = serde_json::from_str(
            r#"{"type": "result", "id": 3, "outputs": [{"name": "y", "components": [["0x1", null, "0X2"]]}]}"#,
        )
        .unwrap();
        let super::super::Answer::Result(r) = a else {
            panic!("not a result")
        };
        let outs = r.outputs.unwrap();
        assert_eq!(
            outs[0].components[0],
            vec![Bits::Hex(1), Bits::Null, Bits::Text("0X2".into())]
        );
    }
}
