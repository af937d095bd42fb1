//! Declarative helpers shared by the model modules.

/// An engine enum carried as lower-case text. Unknown values survive as `Other` so a newer engine
/// that adds a state never breaks decoding.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)*
            /// A value this client does not know yet.
            Other(String),
        }

        impl $name {
            /// The wire text of this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Other(text) => text,
                }
            }

            /// Parses wire text; never fails.
            pub fn parse(text: &str) -> Self {
                match text {
                    $($text => Self::$variant,)*
                    other => Self::Other(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Ok(Self::parse(text.trim()))
            }
        }
    };
}

/// A plural wrapper element (`<vms><vm/>…</vms>`) around a list of singular children.
macro_rules! collection {
    ($(#[$meta:meta])* $name:ident, $root:literal, $child:literal, $item:ty) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename = $root)]
        pub struct $name {
            #[serde(rename = $child, default, deserialize_with = "crate::decode_budget::items")]
            pub items: Vec<$item>,
        }

        impl crate::xml::Root for $name {
            const ROOT: &'static str = $root;
        }

        impl From<Vec<$item>> for $name {
            fn from(items: Vec<$item>) -> Self {
                Self { items }
            }
        }

        impl From<$name> for Vec<$item> {
            fn from(list: $name) -> Self {
                list.items
            }
        }
    };
}

/// The root element of single engine objects (collections get theirs from [`collection`]).
macro_rules! roots {
    ($($name:ty = $root:literal),* $(,)?) => {
        $(impl crate::xml::Root for $name {
            const ROOT: &'static str = $root;
        })*
    };
}

pub(crate) use collection;
pub(crate) use roots;
pub(crate) use string_enum;
