# CLI tests: shell scripts under tests/cli/ that drive the built `shardwise` binary.
# Included from the top-level CMakeLists.txt when SHARDWISE_BUILD_APPS is on.
add_test(NAME cli_layout
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/layout_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR}/examples/models)
set_tests_properties(cli_layout PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_config
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/config_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli_config PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_usability
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/usability_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_usability PROPERTIES LABELS "cli;mpi" TIMEOUT 300)
