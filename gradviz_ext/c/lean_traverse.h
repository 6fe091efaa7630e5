/* Lean traversal of nodes and tensors for the cyclic garbage collector (Note [Lean
 * traversal] in gradviz_ext/_ops.py).
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every module that
 * cimports it); static functions and storage only, after Python.h. Only _ops installs the
 * traversals, so the plans below live in _ops's copy.
 *
 * Cython's tp_traverse visits every object field of an extension type, None included, and a
 * subclass's calls its base's through the base's slot. A node of a graph is traversed by
 * every young collection that finds it, and by the full ones, with every field visited: ~13
 * calls of the collector's visit function per op node, most of them on None. The lean
 * traversal visits a field only when it holds something other than None, skips the fields
 * its caller names (ones that hold only objects that cannot lead back to a node or tensor:
 * the op's spec, tuples of flags and metadata, numpy arrays, which are no GC objects
 * anyway), and does a subclass's and its base's fields in one pass.
 *
 * The plan of a type is learned from the type itself, not from field names: a fresh probe
 * instance has None in every object field (Cython's tp_new) and NULL or 0 elsewhere, so the
 * pointer-sized slots holding None, or one of the skip objects the caller stored in the
 * probe, are the object fields. The type's own traversal, run on the probe, must visit
 * exactly that many objects besides the type, or the plan is refused and the type keeps
 * Cython's traversal. Skipping a field can only keep a cycle through it alive (a leak),
 * never free an object in use; the fields skipped cannot be part of a cycle.
 */
#ifndef GRADVIZ_LEAN_TRAVERSE_H
#define GRADVIZ_LEAN_TRAVERSE_H

#define GRADVIZ_LEAN_TYPES 3
#define GRADVIZ_LEAN_FIELDS 32

typedef struct {
    int count;
    Py_ssize_t offsets[GRADVIZ_LEAN_FIELDS];
} gradviz_lean_plan;

static gradviz_lean_plan gradviz_lean_plans[GRADVIZ_LEAN_TYPES];

static inline int gradviz_lean_visit(PyObject *self, visitproc visit, void *arg,
                                     const gradviz_lean_plan *plan) {
    /* locals: the visit function is opaque, so fields read through ``plan`` would be
     * read again after every call */
    const int count = plan->count;
    const Py_ssize_t *offsets = plan->offsets;
    int i;
    /* as Cython's root traversal: instances of a heap type (a Python subclass) visit it */
    if (PyType_HasFeature(Py_TYPE(self), Py_TPFLAGS_HEAPTYPE))
        Py_VISIT((PyObject *)Py_TYPE(self));
    for (i = 0; i < count; i++) {
        PyObject *field = *(PyObject **)((char *)self + offsets[i]);
        if (field != NULL && field != Py_None) {
            int e = visit(field, arg);
            if (e) return e;
        }
    }
    return 0;
}

static int gradviz_lean_traverse_0(PyObject *self, visitproc visit, void *arg) {
    return gradviz_lean_visit(self, visit, arg, &gradviz_lean_plans[0]);
}
static int gradviz_lean_traverse_1(PyObject *self, visitproc visit, void *arg) {
    return gradviz_lean_visit(self, visit, arg, &gradviz_lean_plans[1]);
}
static int gradviz_lean_traverse_2(PyObject *self, visitproc visit, void *arg) {
    return gradviz_lean_visit(self, visit, arg, &gradviz_lean_plans[2]);
}
static const traverseproc gradviz_lean_traversals[GRADVIZ_LEAN_TYPES] = {
    gradviz_lean_traverse_0, gradviz_lean_traverse_1, gradviz_lean_traverse_2,
};

typedef struct {
    PyObject *type;
    Py_ssize_t visits;  /* objects visited besides the type */
} gradviz_lean_count;

static int gradviz_lean_count_visit(PyObject *object, void *arg) {
    gradviz_lean_count *count = (gradviz_lean_count *)arg;
    if (object != count->type) count->visits++;
    return 0;
}

/* Learn the plan of ``type`` from ``probe`` (a fresh instance of exactly ``type``, with each
 * object in the tuple ``skip`` stored in one field) into slot ``which``. Returns 1 when the
 * plan matches the type's traversal, 0 when it does not (nothing is installed), -1 on an
 * error. The traversal is installed by gradviz_lean_install, once every plan is learned:
 * a subclass's own traversal calls its base's through the base's slot. */
static inline int gradviz_lean_learn(PyObject *type, PyObject *probe, PyObject *skip, int which) {
    PyTypeObject *t = (PyTypeObject *)type;
    gradviz_lean_plan plan;
    gradviz_lean_count count;
    Py_ssize_t offset, skipped = 0, i;
    if (!PyType_Check(type) || Py_TYPE(probe) != t || !PyTuple_Check(skip)
            || which < 0 || which >= GRADVIZ_LEAN_TYPES || t->tp_traverse == NULL
            || t->tp_itemsize != 0 || t->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_ValueError, "gradviz_lean_learn: not a fixed-size extension type "
                                          "with its probe");
        return -1;
    }
    plan.count = 0;
    for (offset = sizeof(PyObject); offset + (Py_ssize_t)sizeof(PyObject *) <= t->tp_basicsize;
         offset += sizeof(PyObject *)) {
        PyObject *field = *(PyObject **)((char *)probe + offset);
        int skips = 0;
        if (field == NULL) continue;
        for (i = 0; i < PyTuple_GET_SIZE(skip); i++)
            if (field == PyTuple_GET_ITEM(skip, i)) skips = 1;
        if (skips) {
            skipped++;
        } else if (field == Py_None) {
            if (plan.count == GRADVIZ_LEAN_FIELDS) return 0;
            plan.offsets[plan.count++] = offset;
        }
    }
    if (skipped != PyTuple_GET_SIZE(skip)) return 0;
    count.type = type;
    count.visits = 0;
    if (t->tp_traverse(probe, gradviz_lean_count_visit, &count) != 0) return 0;
    if (count.visits != plan.count + skipped) return 0;
    gradviz_lean_plans[which] = plan;
    return 1;
}

/* Install the traversal of learned slot ``which`` on ``type``. */
static inline void gradviz_lean_install(PyObject *type, int which) {
    ((PyTypeObject *)type)->tp_traverse = gradviz_lean_traversals[which];
}

/* Whether ``type`` traverses its instances with a lean traversal (for tests). */
static inline int gradviz_lean_installed(PyObject *type) {
    int i;
    for (i = 0; i < GRADVIZ_LEAN_TYPES; i++)
        if (((PyTypeObject *)type)->tp_traverse == gradviz_lean_traversals[i]) return 1;
    return 0;
}

#endif  /* GRADVIZ_LEAN_TRAVERSE_H */
