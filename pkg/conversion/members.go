package conversion

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Fields of a VolumeGroupSnapshotContent's status and of its members.
const (
	fieldInfoList       = "volumeSnapshotInfoList"
	fieldPairList       = "volumeSnapshotHandlePairList"
	fieldVolumeHandle   = "volumeHandle"
	fieldSnapshotHandle = "snapshotHandle"
	fieldCreationTime   = "creationTime"
	fieldReadyToUse     = "readyToUse"
	fieldRestoreSize    = "restoreSize"
)

// toPairs turns status.volumeSnapshotInfoList into v1beta1's
// status.volumeSnapshotHandlePairList. When any info has more than its
// handles, the whole list is kept in the annotation AnnMemberInfo.
func toPairs(obj map[string]any) error {
	status, _ := obj["status"].(map[string]any)
	infos, err := takeList(status, fieldInfoList)
	if err != nil || infos == nil {
		return err
	}
	pairs := make([]any, 0, len(infos))
	more := false
	for _, info := range infos {
		pair := map[string]any{}
		for k, v := range info {
			if k == fieldVolumeHandle || k == fieldSnapshotHandle {
				pair[k] = v
			} else {
				more = true
			}
		}
		pairs = append(pairs, pair)
	}
	status[fieldPairList] = pairs
	if !more {
		return nil
	}
	b, err := json.Marshal(infos)
	if err != nil {
		return fmt.Errorf("status.%s: %w", fieldInfoList, err)
	}
	return setAnnotation(obj, AnnMemberInfo, string(b))
}

// toInfos turns v1beta1's status.volumeSnapshotHandlePairList into
// status.volumeSnapshotInfoList. Each info gets the fields the annotation
// kept for the same handles, else what the member's own content says, else
// the handles alone. An info list already present wins over the pairs.
func toInfos(obj map[string]any, members Members) error {
	kept := takeKept(obj)
	status, _ := obj["status"].(map[string]any)
	pairs, err := takeList(status, fieldPairList)
	if err != nil || pairs == nil {
		return err
	}
	if list, ok := status[fieldInfoList].([]any); ok && len(list) > 0 {
		return nil
	}
	spec, _ := obj["spec"].(map[string]any)
	driver, _ := spec["driver"].(string)
	groupHandle, _ := status["volumeGroupSnapshotHandle"].(string)
	infos := make([]any, 0, len(pairs))
	for i, pair := range pairs {
		info := map[string]any{}
		for k, v := range pair {
			info[k] = v
		}
		if extra, ok := kept.take(i, pair); ok {
			for k, v := range extra {
				info[k] = v
			}
		} else if sh, _ := pair[fieldSnapshotHandle].(string); members != nil && sh != "" && driver != "" {
			if m, ok := members.Member(driver, groupHandle, sh); ok {
				fillFromMember(info, m)
			}
		}
		infos = append(infos, info)
	}
	status[fieldInfoList] = infos
	return nil
}

func fillFromMember(info map[string]any, m MemberInfo) {
	if m.CreationTime != nil {
		info[fieldCreationTime] = json.Number(fmt.Sprint(*m.CreationTime))
	}
	if m.ReadyToUse != nil {
		info[fieldReadyToUse] = *m.ReadyToUse
	}
	if m.RestoreSize != nil {
		info[fieldRestoreSize] = json.Number(fmt.Sprint(*m.RestoreSize))
	}
}

// takeList removes status[field] and returns it as a list of objects; nil
// when absent or null (a null stays as it is).
func takeList(status map[string]any, field string) ([]map[string]any, error) {
	raw := status[field]
	if raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("status.%s is %s, not a list", field, jsonType(raw))
	}
	out := make([]map[string]any, 0, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("status.%s[%d] is %s, not an object", field, i, jsonType(e))
		}
		out = append(out, m)
	}
	delete(status, field)
	return out, nil
}

// kept is the info list the annotation AnnMemberInfo kept.
type kept []map[string]any

// take returns the kept info of the i-th pair: the i-th kept one when its
// handles are the pair's (the list was not edited at v1beta1), else the
// first unused one with the same handles.
func (k kept) take(i int, pair map[string]any) (map[string]any, bool) {
	key := handlesKey(pair)
	if i < len(k) && k[i] != nil && handlesKey(k[i]) == key {
		info := k[i]
		k[i] = nil
		return info, true
	}
	for j, info := range k {
		if info != nil && handlesKey(info) == key {
			k[j] = nil
			return info, true
		}
	}
	return nil, false
}

// takeKept removes the annotation AnnMemberInfo and returns what it kept.
// An annotation that does not parse is dropped: it may have been edited by
// hand, and the member contents still say the same.
func takeKept(obj map[string]any) kept {
	meta, _ := obj["metadata"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	raw, present := anns[AnnMemberInfo]
	if !present {
		return nil
	}
	delete(anns, AnnMemberInfo)
	if len(anns) == 0 {
		delete(meta, "annotations")
	}
	text, _ := raw.(string)
	var list kept
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	if err := d.Decode(&list); err != nil {
		return nil
	}
	return list
}

// handlesKey identifies a member by its two handles, as written.
func handlesKey(m map[string]any) string {
	b, _ := json.Marshal([]any{m[fieldVolumeHandle], m[fieldSnapshotHandle]})
	return string(b)
}

func setAnnotation(obj map[string]any, key, value string) error {
	if obj["metadata"] == nil {
		obj["metadata"] = map[string]any{}
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return fmt.Errorf("metadata is %s, not an object", jsonType(obj["metadata"]))
	}
	if meta["annotations"] == nil {
		meta["annotations"] = map[string]any{}
	}
	anns, ok := meta["annotations"].(map[string]any)
	if !ok {
		return fmt.Errorf("metadata.annotations is %s, not an object", jsonType(meta["annotations"]))
	}
	anns[key] = value
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
