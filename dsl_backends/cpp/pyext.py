"""A C++ module's kernels called as a Python extension's functions rather than through ctypes: ctypes
converts each argument through its `argtypes` and libffi, ~5 us a call on the host after a cache flush
(a tenth of a small pointwise program's time), an extension's fast call ~0.5. The library is the same
file either way: the bindings are one more translation unit, compiled where Python's headers are present
(`-DAKG_PYEXT`, part of the build's cache key); without them the module keeps ctypes."""

from __future__ import annotations

import re
from collections.abc import Iterable

SIGNATURE = re.compile(r'^extern "C" (?:AKG_WIDE )?((?:int|void) (\w+)\(.*\)) \{$', re.M)

_HELPERS = r'''#ifdef AKG_PYEXT
#include <Python.h>
#include <tuple>
#include <utility>
template <typename T> static inline T akg_py_arg(PyObject* o) {  // as ctypes' c_void_p and c_int64 take them
    if constexpr (!std::is_pointer<T>::value) return (T)PyLong_AsLongLong(o);
    else if (o == Py_None) return nullptr;
    else return (T)PyLong_AsVoidPtr(o);
}
template <typename R, typename... A, size_t... I>
static PyObject* akg_py_run(R (*f)(A...), PyObject* const* a, std::index_sequence<I...>) {
    std::tuple<A...> v{akg_py_arg<A>(a[I])...};
    if (PyErr_Occurred()) return nullptr;
    if constexpr (std::is_void<R>::value) {  // the GIL released around the kernel, as ctypes does
        Py_BEGIN_ALLOW_THREADS f(std::get<I>(v)...); Py_END_ALLOW_THREADS
        Py_RETURN_NONE;
    } else {
        R r{};
        Py_BEGIN_ALLOW_THREADS r = f(std::get<I>(v)...); Py_END_ALLOW_THREADS
        return PyLong_FromLongLong((long long)r);
    }
}
template <typename R, typename... A>
static PyObject* akg_py_call(R (*f)(A...), const char* name, PyObject* const* a, Py_ssize_t n) {
    if (n != (Py_ssize_t)sizeof...(A)) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments (%zd given)", name, (int)sizeof...(A), n);
        return nullptr;
    }
    return akg_py_run(f, a, std::index_sequence_for<A...>{});
}
'''


def bindings(sources: Iterable[str], names: list[str]) -> str:
    """The bindings unit for kernels `names` (their `extern "C"` definitions in `sources`), or "" where one
    is not found (the module keeps ctypes)."""
    found = {m.group(2): m.group(1) for text in sources for m in SIGNATURE.finditer(text)}
    if not names or any(n not in found for n in names):
        return ""
    decls = 'extern "C" {\n' + "".join(f"{found[n]};\n" for n in names) + "}\n"
    wrappers = "".join(f"static PyObject* akg_py_{n}(PyObject*, PyObject* const* a, Py_ssize_t n) "
                       f'{{ return akg_py_call({n}, "{n}", a, n); }}\n' for n in names)
    table = "".join(f'    {{"{n}", (PyCFunction)(void (*)(void))akg_py_{n}, METH_FASTCALL, nullptr}},\n' for n in names)
    return (_HELPERS + decls + wrappers + "static PyMethodDef akg_py_methods[] = {\n" + table
            + "    {nullptr, nullptr, 0, nullptr}};\n"
            + 'static struct PyModuleDef akg_py_module = {PyModuleDef_HEAD_INIT, "akg_kernels", nullptr, -1, '
            "akg_py_methods};\nPyMODINIT_FUNC PyInit_akg_kernels(void) { return PyModule_Create(&akg_py_module); }\n"
            "#endif\n")


# the loader's side (inside BUILD): the flags, and the library loaded as the extension where it is one
RUNTIME = '''
import sysconfig as _sysconfig


def _akg_pyext(src):  # Python's headers where the source has bindings (their path names the Python version)
    inc = _sysconfig.get_paths().get("include") or ""
    return ["-DAKG_PYEXT", "-I" + inc] if "#ifdef AKG_PYEXT" in src and _os.path.exists(
        _os.path.join(inc, "Python.h")) else []


def _akg_extension(lib):
    """The library's kernels as an extension module's functions where it was built as one, else `lib`."""
    if "-DAKG_PYEXT" not in _AKG_CMD:
        return lib
    try:
        from importlib.machinery import ExtensionFileLoader
        from importlib.util import module_from_spec, spec_from_loader

        loader = ExtensionFileLoader("akg_kernels", lib._name)
        mod = module_from_spec(spec_from_loader("akg_kernels", loader))
        loader.exec_module(mod)
        return mod
    except Exception:  # noqa: BLE001 - ctypes calls the same functions
        return lib
'''
