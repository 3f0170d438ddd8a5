//! `settings!`: a struct whose fields are declared with their settings. Each field is one of
//!
//! - `setting(DECL)`: a [`Setting`](super::decl::Setting) written right there; the field's
//!   doc comment is its `--help` (and the settings reference's text);
//! - `shared(STATIC)`: a setting declared once in a `static` because several commands read
//!   it (`--config`, `--merge-domains`); the field's doc comment is rustdoc only;
//! - `group()`: a nested `settings!` struct;
//! - `with(f, Inputs…)`: computed by `f(&Resolver)` from settings of its own, declared in
//!   the `settings!` structs listed after it (which `f` resolves, or not: xDS settings are
//!   read only when xDS is on).
//!
//! The macro writes the struct, [`Group`](super::resolver::Group) (its table of settings and
//! its resolution, in field order) and `Default` (every setting at its default):
//!
//! ```ignore
//! settings! {
//!     /// The resolved RLQS settings.
//!     pub struct RlqsSettings {
//!         /// RLQS: lifetime of a quota assignment
//!         pub assignment_ttl: Duration = setting(
//!             Setting::value("rlqs-assignment-ttl", "DURATION", values::positive_duration)
//!                 .default("60s")
//!         ),
//!     }
//! }
//! ```

macro_rules! settings {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $fvis:vis $field:ident : $ty:ty = $kind:ident ( $($args:tt)* )
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis struct $name {
            $( $(#[doc = $doc])* $fvis $field: $ty, )*
        }

        impl $crate::settings::resolver::Group for $name {
            fn table(out: &mut Vec<&'static dyn $crate::settings::decl::Decl>) {
                $( $crate::settings::declare::settings!(@table out, $ty, $kind($($args)*), [$($doc)*]); )*
            }

            fn from_resolver(
                r: &$crate::settings::resolver::Resolver<'_>,
            ) -> Result<Self, $crate::settings::SettingsError> {
                Ok($name {
                    $( $field: $crate::settings::declare::settings!(@value r, $ty, $kind($($args)*), [$($doc)*]), )*
                })
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $crate::settings::resolver::defaults()
            }
        }
    };

    (@table $out:ident, $ty:ty, setting($decl:expr), [$($doc:literal)*]) => {
        $out.push($crate::settings::declare::settings!(@decl $ty, $decl, [$($doc)*]))
    };
    (@table $out:ident, $ty:ty, shared($decl:expr), [$($doc:literal)*]) => {
        $out.push($crate::settings::resolver::decl::<$ty>(&$decl))
    };
    (@table $out:ident, $ty:ty, group(), [$($doc:literal)*]) => {
        <$ty as $crate::settings::resolver::Group>::table($out)
    };
    (@table $out:ident, $ty:ty, with($f:expr $(, $input:ty)*), [$($doc:literal)*]) => {
        $( <$input as $crate::settings::resolver::Group>::table($out); )*
    };

    (@value $r:ident, $ty:ty, setting($decl:expr), [$($doc:literal)*]) => {
        <$ty as $crate::settings::resolver::Field>::resolve(
            $r,
            $crate::settings::declare::settings!(@decl $ty, $decl, [$($doc)*]),
        )?
    };
    (@value $r:ident, $ty:ty, shared($decl:expr), [$($doc:literal)*]) => {
        <$ty as $crate::settings::resolver::Field>::resolve($r, &$decl)?
    };
    (@value $r:ident, $ty:ty, group(), [$($doc:literal)*]) => {
        <$ty as $crate::settings::resolver::Group>::from_resolver($r)?
    };
    (@value $r:ident, $ty:ty, with($f:expr $(, $input:ty)*), [$($doc:literal)*]) => {{
        let f: fn(
            &$crate::settings::resolver::Resolver<'_>,
        ) -> Result<$ty, $crate::settings::SettingsError> = $f;
        f($r)?
    }};

    // The declaration as a `'static` of the field's type, its help from the doc comment.
    (@decl $ty:ty, $decl:expr, []) => {
        $crate::settings::resolver::decl::<$ty>(const { &$decl })
    };
    (@decl $ty:ty, $decl:expr, [$($doc:literal)+]) => {
        $crate::settings::resolver::decl::<$ty>(const { &$decl.help(concat!($($doc),+)) })
    };
}

pub(crate) use settings;
