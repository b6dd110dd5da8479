//! The library's reports as Python objects: each a read-only class around the library's own
//! value, one property per field, with `to_dict()` giving the report's JSON form (the MCP
//! server's and the CLI's contract, `docs/mcp.md`) as Python values.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::Serialize;

/// `value` as Python objects: objects as dicts, arrays as lists.
pub(crate) fn to_python(py: Python<'_>, value: &serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into_pyobject(py)?.into_any().unbind(),
            (None, Some(u), _) => u.into_pyobject(py)?.into_any().unbind(),
            (None, None, f) => f.unwrap_or(f64::NAN).into_pyobject(py)?.into_any().unbind(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_python(py, v)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// The JSON form of `report` as Python values.
pub(crate) fn dict_of(py: Python<'_>, report: &impl Serialize) -> PyResult<Py<PyAny>> {
    let value = serde_json::to_value(report)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    to_python(py, &value)
}

/// `Name(field=repr, …)` from the report's JSON form.
pub(crate) fn repr_of(py: Python<'_>, name: &str, report: &impl Serialize) -> PyResult<String> {
    let dict = dict_of(py, report)?;
    let dict = dict.bind(py);
    let mut parts = Vec::new();
    if let Ok(dict) = dict.cast::<PyDict>() {
        for (k, v) in dict.iter() {
            parts.push(format!("{}={}", k.str()?, v.repr()?));
        }
    }
    Ok(format!("{name}({})", parts.join(", ")))
}

/// A read-only Python class around a library report: `report! { /// doc
/// Name(LibraryType) in "module" { /// doc
/// field: Type, … } }`. Each field is a property returning the library's field converted to
/// `Type` (`.clone().into()`), or `field: Type = |inner| expression` computing it from the
/// whole library value.
macro_rules! report {
    (
        $(#[$meta:meta])*
        $name:ident($inner:ty) in $module:literal {
            $(
                $(#[$fmeta:meta])*
                $field:ident: $ty:ty $(= |$v:ident| $conv:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[pyo3::pyclass(frozen, module = $module)]
        #[derive(Debug)]
        pub(crate) struct $name(pub(crate) $inner);

        #[pyo3::pymethods]
        impl $name {
            $(
                $(#[$fmeta])*
                #[getter]
                fn $field(&self) -> $ty {
                    report!(@get self.0, $field $(, |$v| $conv)?)
                }
            )*

            /// The report's JSON form, as Python values (what the MCP server and the CLI's
            /// `--json` print for the same work).
            fn to_dict(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                $crate::report::dict_of(py, &self.0)
            }

            fn __repr__(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<String> {
                $crate::report::repr_of(py, stringify!($name), &self.0)
            }
        }

        impl From<$inner> for $name {
            fn from(inner: $inner) -> Self {
                Self(inner)
            }
        }
    };
    (@get $inner:expr, $field:ident) => { $inner.$field.clone().into() };
    (@get $inner:expr, $field:ident, |$v:ident| $conv:expr) => {{
        let $v = &$inner;
        $conv
    }};
}

pub(crate) use report;
