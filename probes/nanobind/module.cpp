// dlconform._nanobind: the glue that puts nanobind's nb::ndarray under test (both roles).
//
// Everything DLPack-related here is nanobind's: its type caster imports an argument (consumer),
// and its nb::ndarray export makes the Python object and the capsules (producer). The glue only
// passes values through; it checks nothing and converts nothing, so that a finding is
// nanobind's behaviour, not ours (harness/dlconform/targets/nanobind_target.py says which is
// which).
#include <cstdint>
#include <cstring>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace {

// Memory the glue owns, handed out as nb::ndarray views (the producer side).
struct Buffer {
    std::vector<uint8_t> bytes;
    explicit Buffer(nb::bytes b) : bytes(b.size()) {
        if (b.size()) std::memcpy(bytes.data(), b.c_str(), b.size());
    }
    uintptr_t address() const { return reinterpret_cast<uintptr_t>(bytes.data()); }
};

// What nanobind's caster made of an argument (the consumer side), kept alive while this lives:
// dropping it releases nanobind's hold on the producer's tensor.
struct Imported {
    nb::ndarray<> array;
};

nb::tuple int64s(const int64_t *values, size_t n) {
    nb::list out;
    for (size_t i = 0; i < n; ++i) out.append(values[i]);
    return nb::tuple(out);
}

template <typename Array>
nb::object wrap(nb::handle owner, uintptr_t address, const std::vector<size_t> &shape,
                const std::vector<int64_t> &strides, uint8_t code, uint8_t bits, uint16_t lanes) {
    nb::dlpack::dtype dt;
    dt.code = code;
    dt.bits = bits;
    dt.lanes = lanes;
    using Pointer = typename Array::VoidPtr;
    Array a(reinterpret_cast<Pointer>(address), shape.size(), shape.data(), owner,
            strides.data(), dt);
    return nb::cast(a);
}

}  // namespace

NB_MODULE(_nanobind, m) {
    m.attr("NANOBIND_VERSION") = nb::make_tuple(NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_PATCH);

    nb::class_<Buffer>(m, "Buffer")
        .def(nb::init<nb::bytes>())
        .def_prop_ro("address", &Buffer::address)
        .def_prop_ro("nbytes", [](const Buffer &b) { return b.bytes.size(); });

    nb::class_<Imported>(m, "Imported")
        .def_prop_ro("data", [](const Imported &i) { return reinterpret_cast<uintptr_t>(i.array.data()); })
        .def_prop_ro("shape", [](const Imported &i) { return int64s(i.array.shape_ptr(), i.array.ndim()); })
        .def_prop_ro("strides", [](const Imported &i) { return int64s(i.array.stride_ptr(), i.array.ndim()); })
        .def_prop_ro("dtype", [](const Imported &i) {
            return nb::make_tuple(i.array.dtype().code, i.array.dtype().bits, i.array.dtype().lanes);
        })
        .def_prop_ro("device", [](const Imported &i) { return nb::make_tuple(i.array.device_type(), i.array.device_id()); });

    // Consumer: nanobind's caster for a writable nb::ndarray<> (an argument it cannot take is a
    // TypeError raised by nanobind's overload resolution).
    m.def("take", [](nb::ndarray<> a) { return Imported{a}; });

    // Producer: an nb::ndarray<nb::array_api> over `address`, owned by `owner` (a Buffer or an
    // earlier view); nanobind makes the returned object with __dlpack__ and __dlpack_device__.
    m.def("view", &wrap<nb::ndarray<nb::array_api>>, nb::arg("owner"), nb::arg("address"), nb::arg("shape"),
          nb::arg("strides"), nb::arg("code"), nb::arg("bits"), nb::arg("lanes"));
    m.def("view_ro", &wrap<nb::ndarray<nb::array_api, nb::ro>>, nb::arg("owner"), nb::arg("address"),
          nb::arg("shape"), nb::arg("strides"), nb::arg("code"), nb::arg("bits"), nb::arg("lanes"));
}
