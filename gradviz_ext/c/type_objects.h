/* Type-object helpers the engine needs from CPython's C API.
 *
 * Included by gradviz_ext/_engine.pxd (Cython copies the include into every
 * module that cimports it); static functions only, after Python.h.
 */
#ifndef GRADVIZ_TYPE_OBJECTS_H
#define GRADVIZ_TYPE_OBJECTS_H

/* An instance of a Python subclass of an extension type, made by the type's tp_new (what
 * ``cls()`` does before ``__init__``) without looking ``__new__`` up and calling it. */
static inline PyObject *gradviz_new_instance(PyObject *type) {
    PyObject *args = PyTuple_New(0);
    PyObject *instance;
    if (args == NULL) return NULL;
    instance = ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, args, NULL);
    Py_DECREF(args);
    return instance;
}

/* A type's version tag: CPython gives a type a new one whenever an attribute of it or of a
 * base is assigned, so an unchanged tag means cached lookups on the type are still right.
 * 0 when the type has no valid tag (then nothing may be cached). */
static inline unsigned int gradviz_type_version(PyObject *type) {
    PyTypeObject *t = (PyTypeObject *)type;
    if (!PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG)) return 0;
    return t->tp_version_tag;
}

/* AccumulateGrad's C name without a module, as PyTorch's (a static type without a dot in its
 * tp_name reports ``__module__ == 'builtins'`` and repr ``<class 'AccumulateGrad'>``). */
static inline int gradviz_name_accumulate_grad(PyObject *type) {
    ((PyTypeObject *)type)->tp_name = "AccumulateGrad";
    PyType_Modified((PyTypeObject *)type);
    return 0;
}

#endif  /* GRADVIZ_TYPE_OBJECTS_H */
