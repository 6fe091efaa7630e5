# Declarations that make _ops.py's classes extension types when compiled.
cimport cython
from cpython.contextvars cimport PyContextVar_Reset, PyContextVar_Set, get_value
cdef extern from "Python.h":
    int PyContext_Enter(object context) except -1
    int PyContext_Exit(object context) except -1
from gradviz_ext._engine cimport (InputMeta, Node, SavedTensor, TensorBase, VersionCounter,
                                  forward_observer, gradient_edge, gradviz_array_dtype,
                                  gradviz_array_address, gradviz_array_has_shape,
                                  gradviz_array_unstrided_empty,
                                  gradviz_new_instance,
                                  init_node, init_node_edges, edge_node, is_grad_enabled,
                                  save_tensor, track_view)

# The op's dtype rule and kernel (_ops.py assigns the same values when interpreted).
cpdef enum:
    DTYPE_NONE = 0
    DTYPE_PROMOTE = 1
    DTYPE_PROMOTE_FLOAT = 2
    DTYPE_CUSTOM = 3
cpdef enum:
    KERNEL_NONE = 0
    KERNEL_ADD = 1
    KERNEL_SUB = 2
    KERNEL_MUL = 3
    KERNEL_DIV = 4
    KERNEL_NEG = 5

# The C lives in gradviz_ext/c/, each part explained in its header (the Notes are in _ops.py).
# Note [Small kernels]: add, sub, mul, div and neg of small float arrays in one C loop.
cdef extern from "c/small_kernels.h":
    int gradviz_small_enable(object capsule, object ndarray, object f32, object f64) except -1
    void gradviz_small_disable()
    object gradviz_small_arith(int kernel, object a, object b)
    object gradviz_small_rows(int kernel, object a, object b)
    int gradviz_small_add_into(object a, object b)

cdef bint _small_add_into(object a, object b)
cdef object _add_arrays(object a, object b)


# Note [Whole-array kernels]: fused add/sub with alpha, lerp, addcmul's x * y + z, relu's backward, transpose plus bias,
# a row vector added to a matrix's rows in place.
cdef extern from "c/array_kernels.h":
    void gradviz_fma_enable()
    object gradviz_fused_add(object a, object b, object alpha, int in_place)
    object gradviz_lerp(object start, object end, object weight)
    object gradviz_fma3(object x, object y, object z)
    object gradviz_threshold_backward(object g, object result)
    object gradviz_transpose_add(object t, object bias)
    int gradviz_add_row_vector(object out, object bias)


# Note [Optimizer steps on arrays] (gradviz/optim/_optimizer.py): Adam's and AdamW's update of
# a parameter and its moments in one pass, the numpy calls' bits (gradviz_ext/c/adam_step.h).
cdef extern from "c/adam_step.h":
    ctypedef struct gradviz_adam_scalars:
        double keep_gradient, beta2, keep_square, correction2, eps, rate, decay, shrink
        int negate, l2, decoupled
    int gradviz_adam_step(object p, object g, object m, object v, object largest,
                          const gradviz_adam_scalars *s)
    int gradviz_adam_covers(object p, object g, object m, object v, object largest,
                            const gradviz_adam_scalars *s)
    void gradviz_adam_run(object p, object g, object m, object v, object largest,
                          const gradviz_adam_scalars *s)
    int gradviz_adam_next_count(object counter, double *next)
    void gradviz_adam_count(object counter, double next)
    int gradviz_adam_corrections(double beta1, double beta2, double lr, double t,
                                 gradviz_adam_scalars *s)

cdef _written_through(TensorBase tensor, object refresh)


# Note [Array cache]: a numpy memory handler (NEP 49) that recycles large blocks.
cdef extern from "c/array_cache.h":
    int gradviz_cache_enable(object api_capsule, Py_ssize_t limit) except -1
    void gradviz_cache_disable()
    object gradviz_cache_enter()
    int gradviz_cache_exit(object previous) except -1
    bint gradviz_cache_wanted(object x)
    void gradviz_cache_clear(Py_ssize_t limit)
    object gradviz_cache_stats()


# Note [Node classes]: OpNode subclasses made as static C types, as PyTorch's node classes.
cdef extern from "c/node_class.h":
    object gradviz_node_class(object base, object name)

# Note [Lean traversal]: Node, OpNode and TensorBase traversed by the collector without None
# fields and without fields that cannot lead back to a node or tensor.
cdef extern from "c/lean_traverse.h":
    int gradviz_lean_learn(object kind, object probe, object skip, int which) except -1
    void gradviz_lean_install(object kind, int which)
    int gradviz_lean_installed(object kind)


cdef class OpSpec:
    cdef public str name
    cdef public str node
    cdef public object node_class
    cdef public object forward
    cdef public object backward
    cdef public object fast_backward
    cdef public object saves
    cdef public object dtype
    cdef public int dtype_rule
    cdef public bint view
    cdef public bint quiet
    cdef public int kernel
    cdef public bint fills_missing
    cdef public list _saves_cache


cdef class OpNode(Node):
    cdef public OpSpec op
    cdef public tuple needs_input_grad
    cdef public dict attrs
    cdef public tuple _kept_inputs
    cdef public SavedTensor _saved_output
    cpdef _apply_grads(self, grads)
    cpdef _materializes_grads(self)
    cdef list _apply_fast(self, grads, bint arrays=*)
    cdef list _fast_one(self, grad, bint arrays)
    cdef list _fast_outputs(self, result, grads, incoming, bint arrays)
    cdef list _kernel_backward(self, int kernel, grad, g, bint arrays)
    cpdef data(self, Py_ssize_t index)
    cdef _operand(self, Py_ssize_t index)
    cdef _kept(self, Py_ssize_t index)
    cpdef output_data(self)
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef object _np_add, _np_subtract, _np_multiply, _np_divide, _np_negative
cdef object _ndarray
cdef object _F16, _F32, _F64
cdef object _NOT_SAVED
cdef object _dtype_of(object data)
cdef bint _has_shape(object data, tuple shape)
cdef object _cache_enter()
cdef int _cache_exit(object previous) except -1
cpdef apply_op(OpSpec op, tuple inputs, dict attrs)
cdef object _unrecorded_binary(OpSpec op, object a, object b, dict attrs)
cdef OpSpec _op_add, _op_sub, _op_mul, _op_div, _op_neg
cdef InputMeta _meta(object tensor)
cdef list _recent_scalars
cdef object _quiet_context
cdef dict _ALPHA_ONE
cdef InputMeta _last_meta
cdef tuple _last_metas
cdef tuple _one_meta(object tensor)
cdef tuple _last_kept
cdef tuple _kept_tuple(tuple inputs, object input_indices)
cdef object _scalar_array(object value, object dtype)
cdef object _dtypes_by_numpy
cdef object _tensor_class
cdef object _wrap(object value)


# Note [GELU kernels] (gradviz/ops/_activation.py): the exact GELU of contiguous float32
# arrays and its derivative, one vectorized pass each (gradviz_ext/c/gelu.h).
cdef extern from "c/gelu.h":
    int gradviz_gelu_enable_up_to(int limit)
    void gradviz_gelu_forward_f32(const float *x, float *out, Py_ssize_t n,
                                  int posinf_is_nan) nogil
    void gradviz_gelu_backward_f32(const float *x, const float *g, float *out,
                                   Py_ssize_t n) nogil


# Note [Summary kernel] (gradviz/instrument/_summary.py): a summary's sums, min and max in one
# pass, numpy's pairwise order (gradviz_ext/c/summary_stats.h).
cdef extern from "c/summary_stats.h":
    void gradviz_stats_f32(const float *x, Py_ssize_t n, double *out)
    void gradviz_stats_f64(const double *x, Py_ssize_t n, double *out)


# Note [Flat windows] (gradviz/ops/_flat_windows.py): a stride-1 2-D convolution's wide
# columns and their adjoint, one pass each (gradviz_ext/c/flat_windows.h).
cdef extern from "c/flat_windows.h":
    ctypedef struct gradviz_flat_windows:
        Py_ssize_t planes, height, width, pad_h, pad_w, padded_w, flat, length, kernels
        const Py_ssize_t *starts
    void gradviz_unfold_wide_f32(const float *x, const gradviz_flat_windows *w, float *cols,
                                 float *scratch) nogil
    void gradviz_unfold_wide_f64(const double *x, const gradviz_flat_windows *w, double *cols,
                                 double *scratch) nogil
    void gradviz_fold_wide_f32(const float *cols, const gradviz_flat_windows *w, float *out,
                               float *scratch) nogil
    void gradviz_fold_wide_f64(const double *cols, const gradviz_flat_windows *w, double *out,
                               double *scratch) nogil

cdef gradviz_flat_windows _flat_plan(object windows, Py_ssize_t planes, object starts)


# Note [Direct convolution] (gradviz/ops/_conv.py): a small 2-D convolution's forward computed
# directly, output pixels as vector lanes (gradviz_ext/c/direct_conv.h).
cdef extern from "c/direct_conv.h":
    ctypedef struct gradviz_conv2d:
        Py_ssize_t batch, channels, height, width, out_channels, out_height, out_width
        int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w
    int gradviz_direct_conv_enable()
    Py_ssize_t gradviz_conv2d_scratch(const gradviz_conv2d *p, Py_ssize_t lanes)
    Py_ssize_t gradviz_conv2d_packed(const gradviz_conv2d *p)
    int gradviz_direct_conv2d_f32(const float *x, const float *w, const float *bias, float *out,
                                  const gradviz_conv2d *p, float *scratch, float *packed,
                                  Py_ssize_t *taps) nogil
    int gradviz_direct_conv2d_f64(const double *x, const double *w, const double *bias,
                                  double *out, const gradviz_conv2d *p, double *scratch,
                                  double *packed, Py_ssize_t *taps) nogil
    Py_ssize_t gradviz_conv2d_weight_scratch(const gradviz_conv2d *p, Py_ssize_t lanes)
    Py_ssize_t gradviz_conv2d_group(const gradviz_conv2d *p)
    Py_ssize_t gradviz_conv2d_channels_up(Py_ssize_t out_channels)
    Py_ssize_t gradviz_conv2d_taps_up(Py_ssize_t count)
    int gradviz_direct_conv2d_weight_grad_f32(const float *x, const float *g, float *grad_w,
                                              const gradviz_conv2d *p, float *scratch,
                                              float *partial, float *rows,
                                              Py_ssize_t *taps) nogil
    int gradviz_direct_conv2d_weight_grad_f64(const double *x, const double *g, double *grad_w,
                                              const gradviz_conv2d *p, double *scratch,
                                              double *partial, double *rows,
                                              Py_ssize_t *taps) nogil


# Note [Layer norm kernel] (gradviz/ops/_nn.py): layer norm's forward over the last dim, one
# row at a time, numpy's bits (gradviz_ext/c/layer_norm.h).
cdef extern from "c/layer_norm.h":
    void gradviz_layer_norm_f32(const float *x, Py_ssize_t rows, Py_ssize_t n, float eps,
                                const float *weight, const float *bias, float *out,
                                float *mean, float *var, float *rstd, float *squares) nogil
    void gradviz_layer_norm_f64(const double *x, Py_ssize_t rows, Py_ssize_t n, double eps,
                                const double *weight, const double *bias, double *out,
                                double *mean, double *var, double *rstd,
                                double *squares) nogil
    void gradviz_layer_norm_backward_f32(const float *x, const float *g, Py_ssize_t rows,
                                         Py_ssize_t n, const float *weight, const float *mean,
                                         const float *rstd, float *grad_x, float *grad_w,
                                         float *grad_b, float *scratch) nogil
    void gradviz_batch_norm_backward_f32(const float *x, const float *g, Py_ssize_t batch,
                                         Py_ssize_t channels, Py_ssize_t plane,
                                         const float *weight, const float *mean,
                                         const float *rstd, float *grad_x, float *grad_w,
                                         float *grad_b, float *scratch) nogil
    void gradviz_batch_norm_backward_f64(const double *x, const double *g, Py_ssize_t batch,
                                         Py_ssize_t channels, Py_ssize_t plane,
                                         const double *weight, const double *mean,
                                         const double *rstd, double *grad_x, double *grad_w,
                                         double *grad_b, double *scratch) nogil
    void gradviz_layer_norm_backward_f64(const double *x, const double *g, Py_ssize_t rows,
                                         Py_ssize_t n, const double *weight,
                                         const double *mean, const double *rstd,
                                         double *grad_x, double *grad_w, double *grad_b,
                                         double *scratch) nogil


# Note [Softmax kernels] (gradviz/ops/_activation.py): softmax's shift, scale and backward over
# the last dim, log_softmax's shift, row sums and subtraction, one pass per row each, numpy's bits (gradviz_ext/c/softmax.h).
cdef extern from "c/softmax.h":
    void gradviz_softmax_shift_f32(const float *x, Py_ssize_t rows, Py_ssize_t n,
                                   float *out) nogil
    void gradviz_softmax_shift_f64(const double *x, Py_ssize_t rows, Py_ssize_t n,
                                   double *out) nogil
    void gradviz_softmax_scale_f32(float *e, Py_ssize_t rows, Py_ssize_t n) nogil
    void gradviz_softmax_scale_f64(double *e, Py_ssize_t rows, Py_ssize_t n) nogil
    void gradviz_softmax_backward_f32(const float *y, const float *g, Py_ssize_t rows,
                                      Py_ssize_t n, float *out, float *scratch) nogil
    void gradviz_softmax_backward_f64(const double *y, const double *g, Py_ssize_t rows,
                                      Py_ssize_t n, double *out, double *scratch) nogil
    void gradviz_row_sums_f32(const float *e, Py_ssize_t rows, Py_ssize_t n,
                              float *sums) nogil
    void gradviz_row_sums_f64(const double *e, Py_ssize_t rows, Py_ssize_t n,
                              double *sums) nogil
    void gradviz_subtract_rows_f32(float *x, const float *by, Py_ssize_t rows,
                                   Py_ssize_t n) nogil
    void gradviz_subtract_rows_f64(double *x, const double *by, Py_ssize_t rows,
                                   Py_ssize_t n) nogil


# Note [Adding rows in order] (gradviz/ops/_scatter_add.py): add_rows's sums of rows by a
# vector of row indices, in the index's order, its bits (gradviz_ext/c/add_rows.h).
cdef extern from "c/add_rows.h":
    int gradviz_add_rows_f32(float *out, Py_ssize_t rows, const long long *index,
                             Py_ssize_t count, const float *values, Py_ssize_t width,
                             Py_ssize_t *counts) nogil
    int gradviz_add_rows_f64(double *out, Py_ssize_t rows, const long long *index,
                             Py_ssize_t count, const double *values, Py_ssize_t width,
                             Py_ssize_t *counts) nogil


# Note [LSTM forward kernel] and Note [LSTM step kernel] (gradviz/ops/_lstm_layer.py): one
# time step of an LSTM layer, forward and backward, elementwise, in one pass each
# (gradviz_ext/c/lstm_cell.h; numpy's exp and tanh loops through gradviz_ext/c/ufunc_loops.h).
cdef extern from "c/lstm_cell.h":
    int gradviz_lstm_enable(object exp, object tanh, object ufunc_type, int typenum)
    ctypedef struct gradviz_lstm_step_in:
        Py_ssize_t batch, hidden
        const float *recurrent
        Py_ssize_t recurrent_row, recurrent_col
        const float *bias
        const float *projected
        const float *c_prev
        Py_ssize_t projected_row, c_prev_row
        float *gates
        float *g
        float *c
        float *tanh_c
        float *h
    void gradviz_lstm_step_forward_f32(const gradviz_lstm_step_in *s)
    ctypedef struct gradviz_lstm_step:
        Py_ssize_t batch, hidden
        const float *i
        const float *f
        const float *g
        const float *o
        const float *c_prev
        const float *tanh_c
        const float *dh
        const float *dh_add
        const float *dc
        Py_ssize_t i_row, f_row, g_row, o_row, c_prev_row, tanh_c_row, dh_row, dh_add_row
        Py_ssize_t dc_row
        float *dz
        float *dc_out
    void gradviz_lstm_step_backward_f32(const gradviz_lstm_step *s) nogil


# Note [Small batched products] (gradviz/ops/_linalg.py): bmm and baddbmm of small matrices
# summed as torch's loop sums them (gradviz_ext/c/small_bmm.h).
cdef extern from "c/small_bmm.h":
    void gradviz_small_bmm_f32(const float *a, const float *b, const float *input, float beta,
                               float alpha, Py_ssize_t batches, Py_ssize_t rows,
                               Py_ssize_t inner, Py_ssize_t columns, float *out)
    void gradviz_small_bmm_f64(const double *a, const double *b, const double *input,
                               double beta, double alpha, Py_ssize_t batches, Py_ssize_t rows,
                               Py_ssize_t inner, Py_ssize_t columns, double *out)


# Note [Max pool kernels] (gradviz/ops/_conv.py): 2-D max pooling forward and backward in one
# pass each (gradviz_ext/c/max_pool.h).
cdef extern from "c/max_pool.h":
    ctypedef struct gradviz_pool2d:
        Py_ssize_t planes, height, width, out_height, out_width
        int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w
    void gradviz_max_pool2d_f32(const float *x, const gradviz_pool2d *p, float *values,
                                long long *positions)
    void gradviz_max_pool2d_f64(const double *x, const gradviz_pool2d *p, double *values,
                                long long *positions)
    int gradviz_max_pool2d_backward_f32(const float *g, const long long *positions,
                                         const gradviz_pool2d *p, float *grad)
    int gradviz_max_pool2d_backward_f64(const double *g, const long long *positions,
                                         const gradviz_pool2d *p, double *grad)
