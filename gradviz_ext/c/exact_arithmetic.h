/* Arithmetic as numpy does it, for the kernels that must give numpy's bits.
 *
 * Between GRADVIZ_EXACT_BEGIN and GRADVIZ_EXACT_END a multiply and an add stay two roundings,
 * never one fused multiply-add, whatever -march the build's CFLAGS ask for: numpy rounds each
 * operation, and the kernels of summary_stats.h, layer_norm.h, softmax.h and lstm_cell.h replay
 * numpy's operations in numpy's order (Note [Summary kernel], Note [Layer norm kernel], Note
 * [Softmax kernels], Note [LSTM step kernel]).
 */
#ifndef GRADVIZ_EXACT_ARITHMETIC_H
#define GRADVIZ_EXACT_ARITHMETIC_H

#if defined(__clang__)
#define GRADVIZ_EXACT_BEGIN _Pragma("STDC FP_CONTRACT OFF")
#define GRADVIZ_EXACT_END
#elif defined(__GNUC__)
#define GRADVIZ_EXACT_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define GRADVIZ_EXACT_END _Pragma("GCC pop_options")
#else
#define GRADVIZ_EXACT_BEGIN
#define GRADVIZ_EXACT_END
#endif

#endif  /* GRADVIZ_EXACT_ARITHMETIC_H */
