# merged_extras INSTALLED WANTED: the extras to install so that both lists are present,
# INSTALLED's order first (comma-separated, no duplicates). Sourced by bootstrap.sh.
merged_extras() {
    local extras="$1" extra
    for extra in $(echo "$2" | tr ',' ' '); do
        case ",$extras," in
            *",$extra,"*) ;;
            *) extras="${extras:+$extras,}$extra" ;;
        esac
    done
    echo "$extras"
}
