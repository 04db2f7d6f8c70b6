/*
** atk_tuner_src.c — the two tuner sources atk shares, compiled in under
** private names (atk_tuner_names.h): SHA-256, for the key digest and the
** cubin check, and the strict JSON reader, for JSON tables. Sharing the code
** keeps the runtime's digest and parsing identical to the tuner's.
*/
#include "atk_tuner_names.h"

#include "../tuner/sha256.c"
#include "../tuner/json.c"
