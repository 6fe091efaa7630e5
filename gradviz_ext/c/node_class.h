/* Node classes made as static C types (Note [Node classes]).
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every
 * module that cimports it); static functions only, after Python.h.
 */
#ifndef GRADVIZ_NODE_CLASS_H
#define GRADVIZ_NODE_CLASS_H

/* Note [Node classes] (gradviz_ext/_ops.py): a subclass of OpNode named ``name`` made as C
 * extension types are (PyTorch makes its node classes the same way): a type object that is no
 * heap type, with a name without a dot (its module is ``builtins``) and every slot inherited
 * from OpNode by PyType_Ready. Unlike a Python subclass, its instances are allocated, freed and
 * dispatched exactly as OpNode's: Cython checks cpdef methods for Python overrides only on heap
 * types and on types with a __dict__. The type and its name are never freed. */
#include <stdlib.h>
#include <string.h>

static inline PyObject *gradviz_node_class(PyObject *base, PyObject *name) {
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(name, &size);
    PyTypeObject *t;
    char *kept;
    if (utf8 == NULL) return NULL;
    t = (PyTypeObject *)calloc(1, sizeof(PyTypeObject));
    kept = (char *)malloc((size_t)size + 1);
    if (t == NULL || kept == NULL) {
        free(t);
        free(kept);
        return PyErr_NoMemory();
    }
    memcpy(kept, utf8, (size_t)size + 1);
    Py_SET_TYPE((PyObject *)t, &PyType_Type);
    Py_SET_REFCNT((PyObject *)t, 1);
    t->tp_name = kept;
    t->tp_basicsize = ((PyTypeObject *)base)->tp_basicsize;
    t->tp_itemsize = ((PyTypeObject *)base)->tp_itemsize;
    t->tp_flags = Py_TPFLAGS_DEFAULT;
    t->tp_base = (PyTypeObject *)base;
    Py_INCREF(base);
    if (PyType_Ready(t) < 0) return NULL;  /* leaks the two blocks: never expected */
    Py_INCREF((PyObject *)t);  /* ours, forever: a static type is never freed */
    return (PyObject *)t;
}

#endif  /* GRADVIZ_NODE_CLASS_H */
