/*
** atk_tuner_names.h — private names for the tuner sources compiled into atk
** (tuner/sha256.c, tuner/json.c): included before them, it renames their
** at_* symbols to atk__*, so an engine may link libatk and the tuner's
** library together without a clash, and atk needs nothing else of the tuner.
*/
#ifndef ATK_TUNER_NAMES_H
#define ATK_TUNER_NAMES_H

#define at_fail atk__at_fail
#define at_sha256_hex atk__sha256_hex
#define at_json_parse atk__json_parse
#define at_json_free atk__json_free
#define at_json_member atk__json_member
#define at_json_type_name atk__json_type_name
#define at_json_write_string atk__json_write_string
#define at_json_format_number atk__json_format_number
#define at_json_write_base64 atk__json_write_base64
#define at_json_base64_decode atk__json_base64_decode
#define at_json_fail atk__json_fail
#define at_json_check_fields atk__json_check_fields
#define at_json_get_string atk__json_get_string
#define at_json_get_int atk__json_get_int
#define at_json_get_number atk__json_get_number
#define at_json_get_uint3 atk__json_get_uint3

#endif
