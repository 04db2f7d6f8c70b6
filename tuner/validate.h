/*
** validate.h — `autotune validate` (validate.c): the runtime's choice at
** every M of a range, measured against its fallback on the GPU and stored
** in the cache, overrides included.
*/
#ifndef AT_VALIDATE_H
#define AT_VALIDATE_H

/* argv[0] is "validate"; home holds search/ and templates/ (NULL when not
** found: only the norm ops need it). Returns an at_status. */
int at_validate_main(int argc, char **argv, const char *home);

#endif
