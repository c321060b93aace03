# ulpcheck_add_test: a ctest that puts a plugin's (or a Python file's) kernels under ulpcheck.
#
#   ulpcheck_add_test(NAME <test> PLUGIN <target or path> | PYTHON <kernels file>...
#                     [OP <op>]                   # rmsnorm, layernorm, fused_add_rmsnorm, ...; default: the
#                                                 # op of the KERNELS, or every op
#                     [KERNELS <variant>...]      # default: every variant ulpcheck knows, the plugin's included
#                     [CASES <n>] [TIER smoke|default|nightly] [SEED <n>]
#                     [TIMEOUT <seconds>]         # default 1800: a hung kernel fails the test, not the CI job
#                     [GPU]                       # CUDA variants: skipped, saying why, where no GPU is usable
#                     [GPUS <n>]                  # with GPU: GPUs of its own under ctest's resource allocation
#                                                 # (default 1; 2 or more for one rank per GPU)
#                     [LABELS <label>...] [ARGS <more ulpcheck run arguments>...])
#
# The test runs `ulpcheck run --plugin <plugin> --python <file> --op <op>
# --kernel <variant>... --no-save --no-corpus` and passes when every property
# passed and judged cases (exit code 0). Failures print the shrunk case and
# the `ulpcheck repro` command. A Python file needs an interpreter with torch
# ($ULPCHECK_PYTHON at test time, else python3).
function(ulpcheck_add_test)
  cmake_parse_arguments(T "GPU" "NAME;PLUGIN;OP;CASES;TIER;SEED;TIMEOUT;GPUS" "KERNELS;LABELS;ARGS;PYTHON" ${ARGN})
  if(NOT T_NAME OR (NOT T_PLUGIN AND NOT T_PYTHON))
    message(FATAL_ERROR "ulpcheck_add_test: NAME and a PLUGIN or PYTHON file are required")
  endif()
  set(sources "")
  if(T_PLUGIN)
    if(TARGET ${T_PLUGIN})
      list(APPEND sources --plugin "$<TARGET_FILE:${T_PLUGIN}>")
    else()
      list(APPEND sources --plugin "${T_PLUGIN}")
    endif()
  endif()
  foreach(file IN LISTS T_PYTHON)
    get_filename_component(file "${file}" ABSOLUTE)
    list(APPEND sources --python "${file}")
  endforeach()
  if(T_OP)
    list(APPEND sources --op ${T_OP})
  endif()
  if(NOT T_GPUS)
    set(T_GPUS 1)
  elseif(NOT T_GPUS MATCHES "^[1-9][0-9]*$" OR NOT T_GPU)
    message(FATAL_ERROR "ulpcheck_add_test(${T_NAME}): GPUS takes a count of 1 or more, with GPU")
  endif()
  if(NOT T_CASES)
    set(T_CASES 200)
  endif()
  if(NOT T_TIER)
    set(T_TIER smoke)
  endif()
  if(NOT T_SEED)
    set(T_SEED 1)
  endif()
  if(NOT T_TIMEOUT)
    # ulpcheck kills a kernel that hangs in its worker after --case-timeout
    # (300 s) and goes on; this bounds the test as a whole, whatever happens.
    set(T_TIMEOUT 1800)
  endif()
  set(kernels "")
  foreach(k IN LISTS T_KERNELS)
    list(APPEND kernels --kernel ${k})
  endforeach()
  add_test(NAME ${T_NAME}
           COMMAND ulpcheck::cli run ${sources} ${kernels} --cases ${T_CASES} --tier ${T_TIER}
                   --seed ${T_SEED} --no-save --no-corpus --quiet ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_GPU)
    # GPUS GPUs of its own under `ctest --resource-spec-file` (ulpcheck reads
    # CTest's allocation), so GPU tests can run side by side on a multi-GPU runner.
    set_tests_properties(${T_NAME} PROPERTIES SKIP_REGULAR_EXPRESSION "needs a GPU" RESOURCE_GROUPS "${T_GPUS},gpus:1")
  endif()
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
