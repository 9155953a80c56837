# CLI test for `shardwise convert` (tests/cli/convert_cli_test.sh): builds a small checkpoint with
# /usr/bin/python3 + numpy, converts it to MXFP8 and back, checks exit codes and the outputs with
# an independent numpy reader. Only with the CLI (SHARDWISE_BUILD_APPS).
if(NOT SHARDWISE_BUILD_APPS)
  return()
endif()
add_test(NAME cli_convert
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/convert_cli_test.sh $<TARGET_FILE:shardwise>)
set_tests_properties(cli_convert PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_storage_dtypes
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/storage_dtypes_cli_test.sh
                 $<TARGET_FILE:shardwise>)
set_tests_properties(cli_storage_dtypes PROPERTIES LABELS cli TIMEOUT 120)
