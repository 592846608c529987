//! Devices: `CPU`, `CPU:n`, `CUDA:n`, `HIP:n`, and tuples of them for multi-device values.

use std::fmt;
use std::str::FromStr;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    Cpu,
    Cuda,
    Hip,
}

/// One device. `CPU` and `CPU:0` are the same device (tinygrad canonicalizes them too).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    pub backend: Backend,
    pub index: u32,
}

impl Device {
    pub const CPU: Device = Device {
        backend: Backend::Cpu,
        index: 0,
    };

    pub fn cpu(index: u32) -> Device {
        Device {
            backend: Backend::Cpu,
            index,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = match self.backend {
            Backend::Cpu => "CPU",
            Backend::Cuda => "CUDA",
            Backend::Hip => "HIP",
        };
        write!(f, "{b}:{}", self.index)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad device '{0}' (expected CPU, CPU:n, CUDA:n or HIP:n)")]
pub struct BadDevice(pub String);

impl FromStr for Device {
    type Err = BadDevice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadDevice(s.to_string());
        let (name, index) = match s.split_once(':') {
            Some((n, i)) => (n, i.parse::<u32>().map_err(|_| bad())?),
            None => (s, 0),
        };
        let backend = match name {
            "CPU" => Backend::Cpu,
            "CUDA" | "NV" => Backend::Cuda,
            "HIP" | "AMD" => Backend::Hip,
            _ => return Err(bad()),
        };
        Ok(Device { backend, index })
    }
}

/// Where a value lives: one device, or one component per device (a multi-device value).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceSpec {
    Single(Device),
    Multi(Vec<Device>),
}

impl DeviceSpec {
    pub fn devices(&self) -> &[Device] {
        match self {
            DeviceSpec::Single(d) => std::slice::from_ref(d),
            DeviceSpec::Multi(ds) => ds,
        }
    }

    pub fn is_multi(&self) -> bool {
        matches!(self, DeviceSpec::Multi(_))
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Single(d) => write!(f, "{d}"),
            DeviceSpec::Multi(ds) => {
                let names: Vec<String> = ds.iter().map(|d| d.to_string()).collect();
                write!(f, "({})", names.join(", "))
            }
        }
    }
}

impl serde::Serialize for Device {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Device {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// JSON: a string for one device, an array of strings for a multi-device value.
impl serde::Serialize for DeviceSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DeviceSpec::Single(d) => d.serialize(s),
            DeviceSpec::Multi(ds) => ds.serialize(s),
        }
    }
}

impl<'de> serde::Deserialize<'de> for DeviceSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Names first, parsed after, so a bad name gets its own message ("bad device 'TPU:0'").
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Many(Vec<String>),
        }
        let raw = Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a device (\"CPU\", \"CPU:1\", \"CUDA:0\", \"HIP:0\") or a list of devices"))?;
        let parse = |s: &str| s.parse::<Device>().map_err(serde::de::Error::custom);
        Ok(match raw {
            Raw::One(x) => DeviceSpec::Single(parse(&x)?),
            Raw::Many(xs) => {
                DeviceSpec::Multi(xs.iter().map(|x| parse(x)).collect::<Result<_, _>>()?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_devices() {
        assert_eq!("CPU".parse::<Device>().unwrap(), Device::CPU);
        assert_eq!("CPU:0".parse::<Device>().unwrap(), Device::CPU);
        assert_eq!("CUDA:1".parse::<Device>().unwrap().to_string(), "CUDA:1");
        assert!("TPU:0".parse::<Device>().is_err());
        assert!("CPU:x".parse::<Device>().is_err());
    }
}
