# Shows, at every configure, that the layers are enforced (CMakeLists.txt,
# "Layers"): from each layer's include view a header of a higher layer does
# not compile (a back edge fails the build), while a header of a lower one
# does (the view works: the failure is the missing header, nothing else).
# A configure where a back edge compiles stops with an error.
set(_probe_dir ${PROJECT_BINARY_DIR}/layer_probes)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)  # compile only; nothing to link
# layer | a header it may include | a header of a higher layer it must not
set(_probes
    "core|core/error_buckets.h|kernels/registry.h"
    "kernels|core/error_buckets.h|oracles/reference.h"
    "oracles|core/error_buckets.h|properties/error_distribution.h"
    "properties|oracles/reference.h|harness/runner/plan.h")
foreach(probe IN LISTS _probes)
  string(REPLACE "|" ";" probe "${probe}")
  list(GET probe 0 layer)
  list(GET probe 1 allowed)
  list(GET probe 2 forbidden)
  foreach(kind IN ITEMS allowed forbidden)
    set(source ${_probe_dir}/${layer}_${kind}.cpp)
    file(WRITE ${source} "#include \"${${kind}}\"\nint ulpcheck_layer_probe() { return 0; }\n")
    # A result variable per probe: try_compile caches it, and one shared name
    # would let a stale result of another probe stand in.
    set(_compiles ULPCHECK_LAYER_PROBE_${layer}_${kind})
    try_compile(${_compiles} ${_probe_dir}/${layer}_${kind} ${source}
                CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${ULPCHECK_LAYERS_DIR}/${layer}"
                CXX_STANDARD 20
                OUTPUT_VARIABLE _output)
    if(kind STREQUAL "allowed" AND NOT ${_compiles})
      message(FATAL_ERROR "layer check: ${layer} cannot include ${allowed}, a lower layer's header:\n${_output}")
    endif()
    if(kind STREQUAL "forbidden")
      if(${_compiles})
        message(FATAL_ERROR "layer check: ${layer} compiled an include of ${forbidden}, a higher layer's header: "
                            "a back edge would build")
      endif()
      string(FIND "${_output}" "${forbidden}" _named)
      if(_named EQUAL -1)
        message(FATAL_ERROR "layer check: including ${forbidden} from ${layer} failed, but not for want of the "
                            "header:\n${_output}")
      endif()
    endif()
  endforeach()
  list(APPEND _checked "${layer} !-> ${forbidden}")
endforeach()
unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
list(JOIN _checked ", " _checked)
message(STATUS "ulpcheck: layers enforced (a back edge fails to compile: ${_checked})")
